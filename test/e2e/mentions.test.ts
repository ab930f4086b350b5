// `@fleet ...` comments through the real app on the emulator, a real local worker and the real Claude
// CLI against a scripted model server: a maintainer's mention is a task whose prompt carries the
// request; on the task's PR a mention is a review round; anyone else's mention gets no answer.
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

describe("@fleet mentions", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [
            { name: "Bash", input: { command: "echo '- widgets' > CHANGELOG.md", description: "log" } },
          ],
          usage: USAGE,
        },
        { text: "Added the changelog entry.", usage: USAGE },
        {
          toolUses: [
            { name: "Bash", input: { command: "echo '- gadgets' >> CHANGELOG.md", description: "more" } },
          ],
          usage: USAGE,
        },
        { text: "Added gadgets too.", usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, { modelBaseUrl: model.url, concurrency: 1 });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);
  const prompts = () =>
    model.requests.filter((r) => r.kind === "main").map((r) => JSON.stringify(r.body?.messages));

  let issue: number;

  it("a maintainer's mention on an issue is a task for the default coder, the request in its prompt", async () => {
    issue = await h.newIssue("Release notes", "We keep a changelog.");
    await h.comment(issue, "@fleet please add a changelog entry for widgets");
    const task = await waitFor(
      "the mention's task to open its PR",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" ? t : undefined;
      },
      240_000,
    );
    expect(task).toMatchObject({ coder: "claude", requestedBy: "mona" });
    expect(prompts()[0]).toContain("please add a changelog entry for widgets");
    expect(prompts()[0]).toContain("We keep a changelog.");
    // The tracking comment is the answer, as for a label.
    expect(h.botComments(issue).some((c) => c.body.includes("fleet:tracking"))).toBe(true);
  }, 300_000);

  it("a mention on the task's PR is a review round on the same branch", async () => {
    const { pr } = (await taskOf(issue))!;
    await h.comment(pr!, "@fleet add gadgets to the changelog too");
    expect(h.botComments(pr!).some((c) => c.body.includes("Queued another run"))).toBe(true);
    const task = await waitFor(
      "the review round",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.runs?.length === 2 ? t : undefined;
      },
      240_000,
    );
    expect(task.pr).toBe(pr);
    expect(task.runs?.map((r) => r.kind)).toEqual(["work", "review"]);
    expect(prompts().at(-2)).toContain("add gadgets to the changelog too");
  }, 300_000);

  it("a bad coder prefix is answered with what to write; a reader's mention gets nothing", async () => {
    const other = await h.newIssue("Docs", "Write docs.");
    await h.comment(other, "@fleet fleet:cluade write the docs");
    const reply = h.botComments(other).at(-1)?.body ?? "";
    expect(reply).toContain('Unknown coder "cluade"');

    h.gh.addCollaborator(h.full, "visitor", "read");
    const visitor = new Octokit({ baseUrl: h.gh.url, auth: h.gh.userToken("visitor") });
    const before = h.botComments(other).length;
    await h.comment(other, "@fleet write the docs please", visitor);
    expect(h.botComments(other)).toHaveLength(before);
    expect(await taskOf(other)).toBeUndefined();
    // Not a mention: another handle, a code span, an address.
    await h.comment(other, "@fleetwood and `@fleet x` and ops@fleet.dev");
    expect(await taskOf(other)).toBeUndefined();
  }, 120_000);
});
