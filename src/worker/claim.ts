import { transition } from "../core/lifecycle.ts";
import type { Task } from "../core/task.ts";
import type { StateStore } from "../state/store.ts";

const UNCLAIMED = /^dispatch:/;

/** Claims a dispatched task's lease for `holder` (compare-and-swap); undefined when someone else has it. */
export async function claimTask(...args: Parameters<typeof claimTaskState>): Promise<Task | undefined> {
  return (await claimTaskState(...args))?.task;
}

/** `claimTask`, with the beads mirror as the claim saw it (the task's pinned prompt is its bead). */
export async function claimTaskState(
  store: StateStore,
  taskId: string,
  holder: string,
  now: Date,
  ttlMs: number,
  /** The state the worker starts in (planning or running): claimed and started in one commit. */
  startIn?: (task: Task) => "planning" | "running",
) {
  const result = await store.update(({ doc }) => {
    const task = doc.tasks[taskId];
    if (task?.state !== "dispatched" || !task.lease) return null;
    if (task.lease.holder !== holder && !UNCLAIMED.test(task.lease.holder)) return null;
    const at = now.toISOString();
    const lease = {
      ...task.lease,
      holder,
      heartbeatAt: at,
      expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
    };
    const first = startIn?.(task);
    const started = first
      ? { ...transition(task, first, { now: at }), lease }
      : { ...task, lease, updatedAt: at };
    return {
      doc: { ...doc, tasks: { ...doc.tasks, [taskId]: started } },
      message: `claim gh-${task.issue} (${taskId}) by ${holder} (slot ${task.lease.slot})${first ? `, ${first}` : ""}`,
    };
  });
  const task = result.snapshot.doc.tasks[taskId];
  return result.applied && task ? { task, beads: result.snapshot.beads } : undefined;
}

/**
 * While a task runs: its lease renewed every `everyMs` (a third of the lease by default: two missed
 * beats are tolerated, and a beat is a commit, so not more often). When the task is gone from the state,
 * cancelled or held by someone else, the run's signal aborts (the agent and its sandbox are stopped)
 * and `lost()` says why.
 */
export function startHeartbeat(opts: {
  store: StateStore;
  taskId: string;
  holder: string;
  ttlMs: number;
  everyMs?: number;
  clock: () => Date;
  /** Aborts the run with the worker (its shutdown), too. */
  outer?: AbortSignal;
  log: (message: string) => void;
}): { signal: AbortSignal; lost: () => string | undefined; stop: () => void } {
  const { store, taskId, holder, ttlMs, clock } = opts;
  const abort = new AbortController();
  const onOuterAbort = () => abort.abort();
  opts.outer?.addEventListener("abort", onOuterAbort);
  let lost: string | undefined;
  const beat = () =>
    store
      .update(({ doc }) => {
        const t = doc.tasks[taskId];
        if (!t?.lease || t.lease.holder !== holder) {
          lost = t?.state === "cancelled" ? "cancelled" : "lease lost";
          abort.abort();
          return null;
        }
        const now = clock();
        const lease = {
          ...t.lease,
          heartbeatAt: now.toISOString(),
          expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
        };
        return {
          doc: { ...doc, tasks: { ...doc.tasks, [taskId]: { ...t, lease } } },
          message: `heartbeat gh-${t.issue} (${taskId}) by ${holder}`,
        };
      })
      .catch((e) => opts.log(`heartbeat of ${taskId} failed: ${(e as Error).message}`));
  const timer = setInterval(() => void beat(), opts.everyMs ?? ttlMs / 3);
  timer.unref?.();
  return {
    signal: abort.signal,
    lost: () => lost,
    stop: () => {
      clearInterval(timer);
      opts.outer?.removeEventListener("abort", onOuterAbort);
    },
  };
}
