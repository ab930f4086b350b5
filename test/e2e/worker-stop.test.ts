import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const USAGE = { input_tokens: 100, output_tokens: 10 };

describe("a local worker that stops", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker | undefined;

  beforeAll(async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 1\n" },
    });
    model = await startAnthropicScriptServer({
      // The plan phase, then the work: the worker edits the tracking comment twice (running, pr-open).
      turns: [
        { text: "Plan: 1. Write STOPPED.md.", usage: USAGE },
        {
          toolUses: [
            { name: "Bash", input: { command: "echo done > STOPPED.md", description: "write file" } },
          ],
          usage: USAGE,
        },
        { text: "Wrote STOPPED.md.", usage: USAGE },
      ],
    });
  });
  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("writes the tracking-comment edit still waiting for its 15 s window before it exits", async () => {
    // A minute-long throttle: only the flush on stop can show the last state in time.
    worker = await startTestWorker(h, { modelBaseUrl: model.url, trackerIntervalMs: 60_000 });
    const issue = await h.newIssue("Add STOPPED.md", "Create STOPPED.md.");
    await h.label(issue, "fleet:claude");
    const task = await waitFor(
      "the PR",
      async () => (await h.tasks()).find((t: Task) => t.issue === issue && t.state === "pr-open"),
      90_000,
    );
    await worker.stop();
    const tracking = h.botComments(issue).find((c) => c.body.includes(`fleet:tracking ${task.id}`));
    expect(tracking?.body).toMatch(/pr-open/);
  });
});
