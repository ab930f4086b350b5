import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 1000, output_tokens: 50 };
const REVIEW_USAGE = { input_tokens: 700, output_tokens: 30 };
const INLINE = "Call this `formatWidget`, it formats a widget.";

describe("review loop: /fleet instructions in a PR review rerun the agent on the PR's branch (real Claude CLI)", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        // First run: the helper, in a new file.
        {
          toolUses: [
            {
              name: "Bash",
              input: {
                command:
                  "mkdir -p src && printf 'export function helper(w) {\\n  return String(w);\\n}\\n' > src/widget.js",
                description: "write the helper",
              },
            },
          ],
          usage: USAGE,
        },
        { text: "Added the helper in src/widget.js.", usage: USAGE },
        // Review run: the rename the reviewer asked for.
        {
          toolUses: [
            {
              name: "Bash",
              input: { command: "sed -i 's/helper/formatWidget/' src/widget.js", description: "rename" },
            },
          ],
          usage: REVIEW_USAGE,
        },
        { text: "Renamed helper to formatWidget.", usage: REVIEW_USAGE },
        // Second review round.
        {
          toolUses: [
            {
              name: "Bash",
              input: {
                command: "echo 'export default formatWidget;' >> src/widget.js",
                description: "export",
              },
            },
          ],
          usage: REVIEW_USAGE,
        },
        { text: "Exported it as the default.", usage: REVIEW_USAGE },
      ],
    });
    worker = await startTestWorker(h, {
      modelBaseUrl: model.url,
      concurrency: 1,
    });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);
  const mainPrompts = () =>
    model.requests.filter((r) => r.kind === "main").map((r) => JSON.stringify(r.body?.messages ?? []));

  let issue: number;
  let pr: number;
  let firstHead: string;

  it("a maintainer's review with /fleet and an inline comment: a second run commits on top of the first, prompted with both", async () => {
    issue = await h.newIssue("Add a widget helper", "Add a helper that turns a widget into text.");
    await h.label(issue, "fleet:claude");
    const first = await waitFor(
      "the first run's PR",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.pr && t.runs?.length === 1 ? t : undefined;
      },
      240_000,
    );
    pr = first.pr!;
    const { data: opened } = await h.mona.rest.pulls.get({ owner: h.owner, repo: h.name, pull_number: pr });
    firstHead = opened.head.sha;
    const branch = opened.head.ref;
    const played = model.played;
    expect(played).toBe(2);

    await h.mona.rest.pulls.createReview({
      owner: h.owner,
      repo: h.name,
      pull_number: pr,
      event: "COMMENT",
      body: "/fleet rename the helper",
      comments: [{ path: "src/widget.js", line: 1, body: INLINE }],
    });
    await h.settle();
    // The app answers on the PR and queues the task again, with the reviewer's words kept on it.
    expect(h.botComments(pr).some((c) => c.body.includes("Queued another run"))).toBe(true);

    const second = await waitFor(
      "the review run to update the PR",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.runs?.length === 2 ? t : undefined;
      },
      240_000,
    );
    // The run's state commit lands before its report's edit of the tracking comment: the run's end is both.
    await worker.idle();
    expect(second.pr).toBe(pr);
    expect(second.instructions).toBeUndefined();
    expect(second.runs?.map((r) => r.kind)).toEqual(["work", "review"]);

    // A new commit on the same branch, on top of the first.
    const { data: commits } = await h.mona.rest.pulls.listCommits({
      owner: h.owner,
      repo: h.name,
      pull_number: pr,
    });
    expect(commits).toHaveLength(2);
    expect(commits[0]!.sha).toBe(firstHead);
    expect(commits[1]!.parents.map((p) => p.sha)).toEqual([firstHead]);
    const { data: now } = await h.mona.rest.pulls.get({ owner: h.owner, repo: h.name, pull_number: pr });
    expect(now.head.ref).toBe(branch);
    expect(now.head.sha).toBe(commits[1]!.sha);
    const { data: file } = await h.mona.rest.repos.getContent({
      owner: h.owner,
      repo: h.name,
      path: "src/widget.js",
      ref: branch,
      mediaType: { format: "raw" },
    });
    expect(String(file)).toContain("export function formatWidget(w)");

    // The review run's prompt: the instructions and the inline comment with its file and line.
    const reviewPrompt = mainPrompts().find((p) => p.includes("Review feedback on pull request"));
    expect(reviewPrompt).toBeDefined();
    expect(reviewPrompt).toContain("rename the helper");
    expect(reviewPrompt).toContain('file=\\"src/widget.js\\" line=\\"1\\"');
    expect(reviewPrompt).toContain(INLINE);
    // With the code the comment is on, from the comment's diff hunk.
    expect(reviewPrompt).toContain("+export function helper(w) {");
    expect(reviewPrompt).toContain("@mona");
    // The first run's prompt had none of it.
    expect(mainPrompts()[0]).not.toContain("Review feedback");

    // The token report on the issue: a row per run and a total across both.
    const report = h.botComments(issue).find((c) => c.body.includes("fleet:token-report"));
    expect(report?.body).toContain("#### Every run of this task");
    const [one, two] = second.runs!.map((r) => r.totals.usage);
    const n = (v: number) => v.toLocaleString("en-US");
    // The scripted turns' figures, as the CLI reported them (at least the scripted main turns).
    expect(one!.output).toBeGreaterThanOrEqual(2 * USAGE.output_tokens);
    expect(two!.output).toBeGreaterThanOrEqual(2 * REVIEW_USAGE.output_tokens);
    expect(report?.body).toContain(`| 1. work | ${n(one!.input)} | ${n(one!.output)} |`);
    expect(report?.body).toContain(`| 2. review (this run) | ${n(two!.input)} | ${n(two!.output)} |`);
    expect(report?.body).toContain(
      `| **Total (2 runs)** | **${n(one!.input + two!.input)}** | **${n(one!.output + two!.output)}** |`,
    );
  }, 600_000);

  it("refuses /fleet in a review by someone without write access, with a comment, and queues nothing", async () => {
    h.gh.addCollaborator(h.full, "visitor", "read");
    const visitor = new Octokit({ baseUrl: h.gh.url, auth: h.gh.userToken("visitor") });
    const before = (await taskOf(issue))!;
    const played = model.played;
    await visitor.rest.pulls.createReview({
      owner: h.owner,
      repo: h.name,
      pull_number: pr,
      event: "COMMENT",
      body: "/fleet delete everything",
      comments: [{ path: "src/widget.js", line: 2, body: "and this" }],
    });
    await h.settle();
    const notice = h.botComments(pr).find((c) => c.body.includes("Fleet ignored a request from `@visitor`"));
    expect(notice?.body).toContain("Only users with one of these roles");
    const after = (await taskOf(issue))!;
    expect(after.state).toBe("pr-open");
    expect(after.instructions).toBeUndefined();
    expect(after.updatedAt).toBe(before.updatedAt);
    // Nothing was dispatched: the worker has nothing to run and the model server saw no new turn.
    await worker.poll();
    await worker.idle();
    expect(model.played).toBe(played);
  }, 120_000);

  it("a second review round: the new inline comment is current, the first round's is listed as earlier", async () => {
    await h.mona.rest.pulls.createReview({
      owner: h.owner,
      repo: h.name,
      pull_number: pr,
      event: "COMMENT",
      body: "/fleet export it as the default too",
      comments: [{ path: "src/widget.js", line: 2, body: "Keep this line as it is." }],
    });
    await h.settle();
    const third = await waitFor(
      "the second review run",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.runs?.length === 3 ? t : undefined;
      },
      240_000,
    );
    await worker.idle();
    expect(third.runs?.map((r) => r.kind)).toEqual(["work", "review", "review"]);
    const prompts = mainPrompts().filter((p) => p.includes("Review feedback on pull request"));
    const latest = prompts.find((p) => p.includes("export it as the default too"))!;
    expect(latest).toContain('<review-comment author=\\"mona\\" file=\\"src/widget.js\\" line=\\"2\\">');
    expect(latest).toContain("Keep this line as it is.");
    // Round one's comment was made on an older commit: listed apart, not as current feedback.
    expect(latest).toContain("Earlier inline comments, made on an older commit");
    expect(latest).toContain(`- src/widget.js:1 (@mona): ${INLINE}`);
    expect(latest).not.toContain('line=\\"1\\"');
    // The reader's inline comment never reaches the agent.
    expect(latest).not.toContain("and this");
    const { data: commits } = await h.mona.rest.pulls.listCommits({
      owner: h.owner,
      repo: h.name,
      pull_number: pr,
    });
    expect(commits).toHaveLength(3);
    const report = h.botComments(issue).find((c) => c.body.includes("fleet:token-report"));
    expect(report?.body).toContain("| 3. review (this run) |");
    expect(report?.body).toContain("**Total (3 runs)**");
  }, 300_000);
});
