// A worker with room for fewer tasks than are dispatched to it claims them one at a time (its hand-offs,
// its polls): every dispatched task must get its turn within a bounded number of claims, or it waits on
// its unclaimed dispatch lease until that expires (15 minutes; the task is then retried or, with no
// retries left, failed without ever running). claimOrder ranks a task by a hash of the worker and the
// task, the same rank every time, so a task ranked last keeps losing to every newer task.
import { describe, expect, it } from "vitest";
import { dispatchHolder, type LeaseDoc, newLease, takeDispatched } from "../../src/core/leases.ts";
import { newTask } from "../../src/core/task.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const local = dispatchHolder("local");

describe("a worker's claims among more dispatched tasks than it has room for", () => {
  it("take each dispatched task within as many claims as there were tasks waiting before it", () => {
    // Three slots, one worker of concurrency 1: three tasks wait dispatched; each claimed task's run ends
    // and the next queued task is dispatched into the slot it frees.
    const doc: LeaseDoc = { tasks: {}, config: { max_concurrent: 3 } };
    let seq = 0;
    // Each dispatch is a commit of its own, a second after the one before (the lease says when).
    const dispatch = (slot: number, round: number) => {
      const id = `fl-${(++seq).toString(36)}`;
      const task = newTask({
        id,
        repo: "o/r",
        issue: seq,
        title: "",
        coder: "claude",
        model: "m",
        now: t0.toISOString(),
      });
      doc.tasks[id] = {
        ...task,
        state: "dispatched",
        lease: newLease(local, slot, new Date(t0.getTime() + round * 1000)),
      };
      return id;
    };
    const dispatchedAt = new Map<string, number>();
    // The first three were dispatched together, in one commit.
    for (let slot = 1; slot <= 3; slot++) dispatchedAt.set(dispatch(slot, 0), 0);
    const waited: Record<string, number> = {};
    for (let round = 1; round <= 60; round++) {
      const took = takeDispatched(doc, {
        holder: "local:host:4242",
        from: local,
        now: t0,
        startIn: () => "running",
        concurrency: 1,
        inHand: new Set(),
      });
      const [task] = took!.taken;
      waited[task!.id] = round - dispatchedAt.get(task!.id)!;
      // Its run ends: its slot is freed and the next queued task is dispatched into it.
      const { slot } = doc.tasks[task!.id]!.lease!;
      delete doc.tasks[task!.id];
      dispatchedAt.set(dispatch(slot, round), round);
    }
    // Those still waiting at the end count too. Three waited before each: first in, first out takes
    // every task within three claims.
    for (const [id, at] of dispatchedAt) if (doc.tasks[id]) waited[id] = 60 - at;
    const overdue = Object.entries(waited).filter(([, n]) => n > 3);
    expect(overdue).toEqual([]);
  });
});
