// A worker's own commit claims dispatched tasks up to its --concurrency (DispatchedTaker): the room it
// counts must include a run it still has going whose task left its lease meanwhile (a cancel the run
// has not heard of yet, until its next heartbeat), or the worker runs more agents than it was given.
import { describe, expect, it } from "vitest";
import { Label, Poll, runSteps, Unlabel } from "./lifecycle-world.ts";

describe("the hand-off and a worker's concurrency", () => {
  it("a run's end commit takes no more than the worker's room while a cancelled run of its own still goes", async () => {
    // max_concurrent 2: issue 1's claude task and issue 2's codex task run on worker 0 (concurrency 2).
    const w = await runSteps([
      new Label(1, 0),
      new Label(2, 2),
      new Poll(0),
      new Label(2, 0),
      new Label(2, 1),
    ]);
    const w0 = w.workers[0]!;
    expect(w0.runs.size).toBe(2);
    const tasks = () => w.doc().then((d) => Object.values(d.tasks));
    const t1 = (await tasks()).find((t) => t.issue === 1)!;
    const codex = (await tasks()).find((t) => t.issue === 2 && t.coder === "codex")!;
    // The label is removed: the task is cancelled, its slot freed (the app dispatches the next task into
    // it), and worker 0's agent goes on until its next heartbeat says so.
    await new Unlabel(1, 0).run({}, w);
    expect((await tasks()).find((t) => t.id === t1.id)?.state).toBe("cancelled");
    expect(w0.runs.has(t1.id)).toBe(true);
    // The codex run ends: its commit frees a second slot, and worker 0 takes what it thinks it has room for.
    await w.finish(w0, codex.id, "no-change");
    // The cancelled run's agent has not stopped yet: at most 2 agents on this worker.
    expect([...w0.runs.keys()]).toHaveLength(2);
  });
});
