// A worker's run ends, its slot is freed, the same commit's scheduling pass dispatches the next task, and
// the worker claims it in that commit too: through the real app and a real worker on the emulator, with
// the real Claude CLI against a scripted model server. Checked on the state branch's history: the second
// task is never seen dispatched on the head (no other worker could race for it, no poll waited for it),
// and no commit is a claim of its own.
import { fileURLToPath } from "node:url";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { stateHistory } from "../support/state-history.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 500, output_tokens: 20 };

describe("a run's end commit claims the next task for the same worker", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        { toolUses: [{ name: "Write", input: { file_path: "ONE.md", content: "one\n" } }], usage: USAGE },
        { text: "Wrote ONE.md.", usage: USAGE },
        { toolUses: [{ name: "Write", input: { file_path: "TWO.md", content: "two\n" } }], usage: USAGE },
        { text: "Wrote TWO.md.", usage: USAGE },
      ],
    });
    // No timed polls (a run's end still looks at the state at once): the claims are the hand-off's or that look's.
    worker = await startTestWorker(h, { modelBaseUrl: model.url, concurrency: 1, pollMs: 600_000 });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("starts the next agent without a claim commit or a poll", async () => {
    const first = await h.newIssue("One", "Write ONE.md.");
    const second = await h.newIssue("Two", "Write TWO.md.");
    await h.label(first, "fleet:claude");
    await h.label(second, "fleet:claude");
    await h.settle();
    expect((await h.tasks()).find((t) => t.issue === second)?.state).toBe("queued");
    // The worker's first poll ran at its start, before the labels: this one claims the first task.
    await worker.poll();
    for (const issue of [first, second])
      await waitFor(
        `gh-${issue}'s PR`,
        async () => (await h.tasks()).find((t) => t.issue === issue && t.state === "pr-open"),
        180_000,
      );

    const history = await stateHistory(fileURLToPath(h.cloneUrl));
    const secondId = (await h.tasks()).find((t) => t.issue === second)!.id;
    const firstId = (await h.tasks()).find((t) => t.issue === first)!.id;
    const states = history.map(({ doc }) => doc.tasks[secondId]?.state);
    expect(states).not.toContain("dispatched");
    // The commit where the second task left the queue is the one where the first one's run ended, and
    // there the second is already this worker's, running.
    const at = states.findIndex((s, i) => i > 0 && s !== "queued" && states[i - 1] === "queued");
    expect(at).toBeGreaterThan(0);
    const { doc } = history[at]!;
    expect(doc.tasks[secondId]).toMatchObject({ state: "running", lease: { holder: worker.name } });
    // The first task was a poll's claim, by ref (core/claims.ts): the branch shows it running once a
    // commit carried the claim, or still dispatched when its run's end was the first commit after it.
    expect(["running", "dispatched"]).toContain(history[at - 1]!.doc.tasks[firstId]?.state);
    expect(doc.tasks[firstId]).toMatchObject({ state: "pr-open", attempts: 1 });
    // Never more held than the cap, in any commit.
    for (const { doc: d } of history)
      expect(Object.values(d.tasks).filter((t) => t.lease).length).toBeLessThanOrEqual(1);
  }, 300_000);
});
