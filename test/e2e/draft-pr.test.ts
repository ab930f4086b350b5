// draft_pr: true through the real app and worker on the emulator, with the real Claude CLI against a
// scripted model server: the task's pull request opens as a draft at the run's start, on an empty commit
// of Fleet's, is there while the agent works, gets the change at the end and is marked ready (GraphQL
// markPullRequestReadyForReview) when the run succeeds.
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\ndraft_pr: true\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 800, output_tokens: 40 };

describe("draft_pr: true", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        // Held a while: the draft is looked at while the agent works.
        {
          toolUses: [{ name: "Write", input: { file_path: "HELLO.md", content: "hello\n" } }],
          usage: USAGE,
          stallMs: 8_000,
        },
        { text: "Wrote HELLO.md.", usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, { modelBaseUrl: model.url, concurrency: 1 });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("opens the pull request as a draft and marks it ready when the run succeeds", async () => {
    const issue = await h.newIssue("Greeting", "Write HELLO.md.");
    await h.label(issue, "fleet:claude");
    // While the agent works (its first turn not answered yet): the draft is open, with no change in it.
    const draft = await waitFor(
      "the draft at the run's start",
      async () => {
        const { data } = await h.mona.rest.pulls.list({ owner: h.owner, repo: h.name, state: "open" });
        return data.find((p) => p.body?.includes(`Closes #${issue}`));
      },
      180_000,
    );
    expect(model.played).toBe(0);
    expect(draft.draft).toBe(true);
    expect(draft.body).toContain("is working on");
    const { data: early } = await h.mona.rest.pulls.listFiles({
      owner: h.owner,
      repo: h.name,
      pull_number: draft.number,
    });
    expect(early).toEqual([]);
    const task = await waitFor(
      "the PR",
      async () => (await h.tasks()).find((t) => t.issue === issue && t.state === "pr-open"),
      180_000,
    );
    await h.settle();
    const events = h.gh
      .deliveries()
      .filter((d) => d.event === "pull_request")
      .map((d) => d.payload as { action: string; number: number; pull_request: { draft: boolean } })
      .filter((p) => p.number === task.pr);
    // Opened as a draft at the start; the change pushed to it and its body written at the end; then
    // ready: in that order, each once.
    expect(events.map((p) => [p.action, p.pull_request.draft])).toEqual([
      ["opened", true],
      ["synchronize", true],
      ["edited", true],
      ["ready_for_review", false],
    ]);
    const { data: pr } = await h.mona.rest.pulls.get({ owner: h.owner, repo: h.name, pull_number: task.pr! });
    expect(pr.number).toBe(draft.number);
    expect(pr.draft).toBe(false);
    expect(pr.state).toBe("open");
    // The same PR now holds the change and the run's summary.
    const { data: files } = await h.mona.rest.pulls.listFiles({
      owner: h.owner,
      repo: h.name,
      pull_number: pr.number,
    });
    expect(files.map((f) => f.filename)).toEqual(["HELLO.md"]);
    expect(pr.body).not.toContain("is working on");
  }, 400_000);
});
