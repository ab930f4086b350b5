// Deleting fleet/state while a task runs (an operator starting over) never starts a second run of
// it beside the first: the fresh state holds dispatching, the running worker finds its task gone and
// stops its agent, and only then is the issue's task run again. Real app, real worker, real Claude CLI.

import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskOutcome } from "../../src/worker/3-attempt.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
// Real time: the hold must outlast the delete's delivery and the reconcile, which took 8 s on a loaded
// 2-core machine (a 6 s hold had ended before the reconcile queued the task, which then started at once).
const HOLD_MS = 20_000;
const USAGE = { input_tokens: 100, output_tokens: 10 };

describe("fleet/state deleted while a task runs", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;
  const outcomes: Array<{ id: string; outcome: TaskOutcome; at: number }> = [];

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML }, app: { stateResetHoldMs: HOLD_MS } });
  });
  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("holds the fresh state's dispatches until the first run has stopped, then runs the task once", async () => {
    const issue = await h.newIssue("Add NOTES.md", "Create NOTES.md.");
    const first = await (async () => {
      await h.label(issue, "fleet:claude");
      return (await h.tasks()).find((t) => t.issue === issue)!;
    })();
    // The first run's model answer never comes; the second run (after the reset) writes the file.
    model = await startAnthropicScriptServer({
      turns: [
        { stallMs: 120_000, text: "never", usage: USAGE },
        {
          toolUses: [
            { name: "Bash", input: { command: "echo notes > NOTES.md", description: "write" } },
            {
              name: "Bash",
              input: {
                command: `printf '{"status":"done","summary":"Added NOTES.md.","testsRun":[]}' > "$(ls -d ../.fleet-task-*)/RESULT.json"`,
                description: "result",
              },
            },
          ],
          usage: USAGE,
        },
        { text: "Done.", usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, {
      modelBaseUrl: model.url,
      heartbeatMs: 500,
      onOutcome: (id, outcome) => outcomes.push({ id, outcome, at: Date.now() }),
    });
    await waitFor("the first run's model request", async () => model.requests.some((r) => r.kind === "main"));

    await h.mona.rest.git.deleteRef({ owner: h.owner, repo: h.name, ref: "heads/fleet/state" });
    await h.settle();
    const resetAt = Date.now();
    // The reconcile finds the labeled issue without a task and queues it again: held, not dispatched.
    await h.app.reconcile();
    const again = await waitFor("the task queued again", async () =>
      (await h.tasks()).find((t) => t.issue === issue && t.id !== first.id),
    );
    expect(again.state).toBe("queued");
    expect(again.reason).toMatch(/Fleet's state was reset \(fleet\/state deleted\); tasks start after/);

    // The worker finds its task gone at the next heartbeat and stops the agent.
    const stopped = await waitFor("the first run to stop", async () =>
      outcomes.find((o) => o.id === first.id),
    );
    expect(stopped.outcome.outcome).toBe("cancelled");
    expect(stopped.at - resetAt).toBeLessThan(HOLD_MS);

    // Nothing starts before the hold ends; then the wake-up timer dispatches the task by itself.
    const startedAt = await waitFor(
      "the task to start again",
      async () => {
        const t = (await h.tasks()).find((x) => x.id === again.id);
        return t && t.state !== "queued" ? Date.now() : undefined;
      },
      60_000,
    );
    expect(startedAt - resetAt).toBeGreaterThanOrEqual(HOLD_MS - 500);
    expect(startedAt).toBeGreaterThan(stopped.at);
    const done = await waitFor(
      "the task's PR",
      async () => {
        const t = (await h.tasks()).find((x) => x.id === again.id);
        return t?.state === "pr-open" ? t : undefined;
      },
      60_000,
    );
    expect(h.gh.pulls(h.full).filter((p) => p.number === done.pr)).toHaveLength(1);
    await waitFor("the second run's outcome", async () => outcomes.some((o) => o.id === again.id));
    expect(outcomes.filter((o) => o.id === again.id).map((o) => o.outcome.outcome)).toEqual(["pr-opened"]);
    expect(model.requests.filter((r) => r.kind === "main")).toHaveLength(3);
  }, 120_000);
});
