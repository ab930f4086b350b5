import { claimLease, heartbeatIntervalMs, renewLease } from "../core/leases.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import type { StateStore } from "../state/store.ts";

// Step 1 of a run: the worker takes the lease the dispatcher handed out, and keeps it with heartbeats.
// The decisions (who may claim, who may renew) are core/leases.ts; this file is their commits.

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
  const result = await store.update(({ doc }) => claimLease(doc, taskId, { holder, now, ttlMs, startIn }));
  const task = result.snapshot.doc.tasks[taskId];
  return result.applied && task ? { task, beads: result.snapshot.beads } : undefined;
}

/**
 * While a task runs: its lease renewed every `everyMs` (a third of the lease by default). When the task
 * is gone from the state, cancelled or held by someone else, the run's signal aborts (the agent and its
 * sandbox are stopped) and `lost()` says why.
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
  /** What the run adds to each heartbeat's commit (its context, its credentials' windows). */
  alsoDoc?: (doc: FleetStateDoc) => FleetStateDoc;
}): { signal: AbortSignal; lost: () => string | undefined; stop: () => void } {
  const { store, taskId, holder, ttlMs, clock } = opts;
  const abort = new AbortController();
  const onOuterAbort = () => abort.abort();
  opts.outer?.addEventListener("abort", onOuterAbort);
  let lost: string | undefined;
  const beat = async () => {
    let refused: "cancelled" | "gone" | undefined;
    try {
      await store.update(({ doc }) => {
        const renewed = renewLease(doc, taskId, { holder, now: clock(), ttlMs });
        refused = renewed.ok ? undefined : renewed.reason;
        if (!renewed.ok) return null;
        return opts.alsoDoc ? { ...renewed, doc: opts.alsoDoc(renewed.doc) } : renewed;
      });
    } catch (e) {
      // A failed beat is retried at the next interval; the lease outlives two missed beats.
      opts.log(`heartbeat of ${taskId} failed: ${(e as Error).message}`);
      return;
    }
    if (refused) {
      lost = refused === "cancelled" ? "cancelled" : "lease lost";
      abort.abort();
    }
  };
  const timer = setInterval(() => void beat(), opts.everyMs ?? heartbeatIntervalMs(ttlMs));
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
