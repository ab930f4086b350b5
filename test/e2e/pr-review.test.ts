// `/fleet review` on a person's pull request, through the real app on the emulator, a real local worker
// and the real Claude CLI against a scripted model server: the read-only run posts ONE review whose
// inline comments sit on the diff's lines, a finding off the diff lands in the summary, nothing is
// pushed, and the run is counted in the token report.
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: true\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n" +
  // Only a PR that touches lib/ is reviewed by itself; src/calc.js's PR is reviewed when asked.
  "review_on: [opened, ready_for_review]\nreview_paths: ['lib/**']\n";
const USAGE = { input_tokens: 1200, output_tokens: 80 };
const LINES = Array.from({ length: 12 }, (_, n) => `export const v${n + 1} = ${n + 1};`);
const CHANGED = LINES.map((l, n) => (n === 9 ? "export const v10 = eval(input);" : l));
const REVIEW = {
  summary: "One real problem: eval on input. cc @octocat",
  comments: [
    {
      path: "src/calc.js",
      line: 10,
      body: "`eval` on user input runs arbitrary code; parse the number instead.",
    },
    { path: "src/calc.js", line: 2, body: "v2 is unused (this line is not in the diff)." },
  ],
};

const LIB_REVIEW = {
  summary: "Fine apart from one name.",
  comments: [{ path: "lib/util.js", line: 2, body: "Name this `double`." }],
};

describe("agent review of a person's pull request (real Claude CLI)", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": FLEET_YML, "src/calc.js": `${LINES.join("\n")}\n` },
    });
    model = await startAnthropicScriptServer({
      turns: [
        { text: `Reviewed.\n\n\`\`\`json\n${JSON.stringify(REVIEW)}\n\`\`\``, usage: USAGE },
        { text: `\`\`\`json\n${JSON.stringify(LIB_REVIEW)}\n\`\`\``, usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, { modelBaseUrl: model.url, concurrency: 1 });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  /** A pull request mona writes by hand: line 10 of src/calc.js changed on `feature/calc`. */
  async function humanPullRequest(
    path = "src/calc.js",
    content = `${CHANGED.join("\n")}\n`,
    branch = "feature/calc",
  ): Promise<{ number: number; head: string }> {
    const ref = { owner: h.owner, repo: h.name };
    const main = await h.mona.rest.git.getRef({ ...ref, ref: "heads/main" });
    const blob = await h.mona.rest.git.createBlob({ ...ref, content });
    const tree = await h.mona.rest.git.createTree({
      ...ref,
      base_tree: main.data.object.sha,
      tree: [{ path, mode: "100644", type: "blob", sha: blob.data.sha }],
    });
    const commit = await h.mona.rest.git.createCommit({
      ...ref,
      message: "Read v10 from input",
      tree: tree.data.sha,
      parents: [main.data.object.sha],
    });
    await h.mona.rest.git.createRef({ ...ref, ref: `refs/heads/${branch}`, sha: commit.data.sha });
    const pr = await h.mona.rest.pulls.create({
      ...ref,
      title: `Change ${path}`,
      head: branch,
      base: "main",
    });
    await h.settle();
    return { number: pr.data.number, head: commit.data.sha };
  }

  it("`/fleet review` posts one review with inline comments on the diff's lines", async () => {
    const pr = await humanPullRequest();
    // review_paths names lib/ only: this PR is not reviewed until someone asks.
    expect((await h.tasks()).filter((t) => t.issue === pr.number)).toEqual([]);
    await h.comment(pr.number, "/fleet review");
    expect(h.botComments(pr.number).some((c) => c.body.includes("Queued a read-only review"))).toBe(true);
    const task = await waitFor(
      "the review task to finish",
      async () => {
        const t = (await h.tasks()).find((x: Task) => x.issue === pr.number);
        return t && (t.state === "done" || t.state === "failed") ? t : undefined;
      },
      240_000,
    );
    expect(task.reason).toBeUndefined();
    expect(task).toMatchObject({ state: "done", review: { pr: pr.number }, coder: "claude" });
    expect(task.runs?.map((r) => r.kind)).toEqual(["pr-review"]);

    const ref = { owner: h.owner, repo: h.name, pull_number: pr.number };
    const reviews = (await h.mona.rest.pulls.listReviews(ref)).data;
    expect(reviews).toHaveLength(1);
    const review = reviews[0]!;
    expect(review).toMatchObject({ commit_id: pr.head, user: { type: "Bot" } });
    expect(review.state).toBe("COMMENTED");
    expect(review.body).toContain("eval on input");
    // The finding off the diff is in the summary, and nobody is pinged.
    expect(review.body).toContain("`src/calc.js` line 2: v2 is unused");
    expect(review.body).not.toMatch(/@octocat/);
    const inline = (await h.mona.rest.pulls.listReviewComments(ref)).data;
    expect(inline.map((c) => [c.path, c.line, c.pull_request_review_id])).toEqual([
      ["src/calc.js", 10, review.id],
    ]);
    expect(inline[0]!.body).toContain("`eval` on user input");

    // The prompt carried the diff, and the agent was told to change nothing.
    const prompt = JSON.stringify(model.requests.find((r) => r.kind === "main")?.body?.messages);
    expect(prompt).toContain("eval(input)");
    expect(prompt).toContain("READ-ONLY review");
    // Nothing pushed: the PR's head is mona's commit, and no fleet branch exists.
    const branches = (await h.mona.rest.repos.listBranches({ owner: h.owner, repo: h.name })).data;
    expect(branches.map((b) => b.name).filter((n) => n.startsWith("fleet/") && n !== "fleet/state")).toEqual(
      [],
    );
    // The run's tokens (1,200 in, 80 out) are counted on the task like any run's.
    const tracking = await waitFor(
      "the tracking comment's final figures",
      async () => h.botComments(pr.number).find((c) => /Tokens \| 1,280\b/.test(c.body)),
      30_000,
    );
    expect(tracking.body).toContain("fleet:tracking");
    expect(task.totals?.usage).toMatchObject({ input: 1200, output: 80 });
  }, 300_000);

  it("review_on: a PR that touches review_paths is reviewed as it opens", async () => {
    const pr = await humanPullRequest(
      "lib/util.js",
      "export const a = 1;\nexport const twice = (x) => x * 2;\n",
      "feature/lib",
    );
    const task = await waitFor(
      "the automatic review",
      async () => {
        const t = (await h.tasks()).find((x: Task) => x.issue === pr.number);
        return t && (t.state === "done" || t.state === "failed") ? t : undefined;
      },
      240_000,
    );
    expect(task).toMatchObject({ state: "done", review: { pr: pr.number }, requestedBy: "mona" });
    const ref = { owner: h.owner, repo: h.name, pull_number: pr.number };
    expect((await h.mona.rest.pulls.listReviews(ref)).data).toHaveLength(1);
    const inline = (await h.mona.rest.pulls.listReviewComments(ref)).data;
    expect(inline.map((c) => [c.path, c.line])).toEqual([["lib/util.js", 2]]);
  }, 300_000);

  it("`/fleet review` on an issue says it works on pull requests only", async () => {
    const issue = await h.newIssue("Not a PR", "text");
    await h.comment(issue, "/fleet review");
    expect(h.botComments(issue).at(-1)?.body).toContain("works on a pull request only");
  }, 60_000);
});
