// A task as the dispatcher leaves it for a worker: state `dispatched`, its lease the dispatcher's.
import { dispatchHolder, newLease } from "../../src/core/leases.ts";
import { newTask, type Task } from "../../src/core/task.ts";

/** Task `fl-<n>` of issue n, dispatched at `at` into slot n (the lease `ttlMs` long), waiting for a worker. */
export function dispatchedTask(n: number, at: Date, ttlMs?: number): Task {
  const task = newTask({
    id: `fl-${n}`,
    repo: "o/r",
    issue: n,
    title: "",
    coder: "claude",
    model: "m",
    now: at.toISOString(),
  });
  return { ...task, state: "dispatched", lease: newLease(dispatchHolder("local"), n, at, ttlMs) };
}
