// Context pressure through the whole worker path: the real app and local worker, the REAL Claude CLI
// behind the model gateway. The task's context is recorded in the repository state with the heartbeat
// while the run goes, and max_context_pct stops the run with the reason on the tracking comment.

import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { credentialsState } from "../../src/economy/credentials.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, TEST_CREDENTIAL, type TestWorker } from "../support/worker.ts";

describe("context pressure, recorded and enforced by a local worker", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker | undefined;

  beforeAll(async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\nplan_phase: false\nmax_context_pct: 50\n" },
    });
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Bash", input: { command: "echo one > ONE.md", description: "write" } }],
          usage: { input_tokens: 1_000, cache_read_input_tokens: 79_000, output_tokens: 50 },
        },
        {
          // Held for a while: heartbeats go by while the agent waits for this answer.
          stallMs: 4_000,
          toolUses: [{ name: "Bash", input: { command: "echo two > TWO.md", description: "write" } }],
          usage: { input_tokens: 1_000, cache_read_input_tokens: 119_000, output_tokens: 50 },
        },
        { text: "Done.", usage: { input_tokens: 10, output_tokens: 5 } },
      ],
    });
  });
  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("shows the last turn's context on the task as the run goes, and stops the run past max_context_pct", async () => {
    worker = await startTestWorker(h, { modelBaseUrl: model.url });
    const issue = await h.newIssue("Fill the context", "Write ONE.md and TWO.md.");
    await h.label(issue, "fleet:claude");
    const running = await waitFor(
      "the first turn's context on the running task",
      async () =>
        (await h.tasks()).find((t: Task) => t.issue === issue && t.state === "running" && t.context),
      60_000,
    );
    expect(running.context).toMatchObject({ tokens: 80_000, window: 200_000 });
    const failed = await waitFor(
      "the stopped task",
      async () => (await h.tasks()).find((t: Task) => t.issue === issue && t.state === "failed"),
      60_000,
    );
    const reason =
      "stopped: the last turn's context was 120k tokens, 60% of the model's 200k window, over max_context_pct 50";
    expect(failed.reason).toBe(reason);
    expect(failed.context).toMatchObject({ tokens: 120_000, window: 200_000 });
    expect(model.played).toBe(2);
    // What Fleet sent on the credential this hour went into the state with the run (no rate-limit
    // headers from the scripted server: Fleet's own count only).
    const { doc } = await createGitHubStateStore({
      github: githubOverOctokit(h.mona),
      owner: h.owner,
      repo: h.name,
    }).read();
    expect(credentialsState(doc).claude?.[TEST_CREDENTIAL.name]?.windows).toMatchObject({
      windows: {},
      hour: { tokens: 80_050 + 120_050 },
    });
    await waitFor(
      "the reason on the tracking comment",
      async () =>
        h
          .botComments(issue)
          .find(
            (c) =>
              c.body.includes(`fleet:tracking ${failed.id}`) && c.body.includes("over max_context_pct 50"),
          ),
      30_000,
    );
  });
});
