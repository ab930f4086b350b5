import { type ClaimRecord, claimableByRef } from "../core/claims.ts";
import { claimLease, heartbeatIntervalMs, isUnclaimed, renewLease, runIdOfHolder } from "../core/leases.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import type { StateSnapshot, StateStore, UpdateResult } from "../state/store.ts";
import { thisProcess } from "./holder-process.ts";

// Step 1 of a run: the worker takes the lease the dispatcher handed out, and keeps it with heartbeats.
// The decisions (who may claim, who may renew) are core/leases.ts; this file is their commits.

/** Claims a dispatched task's lease for `holder` (compare-and-swap); undefined when someone else has it. */
export async function claimTask(...args: Parameters<typeof claimTaskState>): Promise<Task | undefined> {
  return (await claimTaskState(...args))?.task;
}

/** A task this worker holds, with the beads mirror and the whole state as its claim's commit left them. */
export interface ClaimedTask {
  task: Task;
  beads: StateSnapshot["beads"];
  snapshot: StateSnapshot;
}

/**
 * `claimTask`, with the beads mirror as the claim saw it (the task's pinned prompt is its bead) and the
 * whole state as the claim left it (as fresh as a read: the run starts from it without another).
 */
export async function claimTaskState(
  store: StateStore,
  taskId: string,
  holder: string,
  now: Date,
  ttlMs: number,
  /** The state the worker starts in (planning or running): claimed and started in one commit. */
  startIn?: (task: Task) => "planning" | "running",
  /** On the state the claim is made on: whether the claimer has room for it (a worker's concurrency). */
  mayClaim?: (doc: FleetStateDoc) => boolean,
): Promise<ClaimedTask | undefined> {
  // The lease names this process, so a worker on this machine can tell when it is gone.
  const process = await thisProcess();
  const claimOf = (doc: FleetStateDoc) =>
    mayClaim && !mayClaim(doc)
      ? null
      : claimLease(doc, taskId, { holder, now, ttlMs, startIn, ...(process ? { process } : {}) });
  const picked = (r: UpdateResult): ClaimedTask | undefined => {
    const task = r.snapshot.doc.tasks[taskId];
    return r.applied && task ? { task, beads: r.snapshot.beads, snapshot: r.snapshot } : undefined;
  };
  // Where the store keeps claims beside the branch, an open dispatch is claimed by a ref of its own, no
  // commit on the branch's one head (core/claims.ts). By commit instead: a lease already this holder's
  // (an Actions run whose id the dispatcher recorded), and a dispatch past a quarter of its lease: a
  // writer that does not read claims (the REST transport) sees the claim once the run's first renewal
  // carries it, and that renewal, or the one after it if it fails, must come before the dispatch could
  // run out and be handed to another worker.
  let byCommit = !store.claim || !claimableByRef(taskId);
  if (!byCommit) {
    const byRef = await store.claim!((doc) => {
      const lease = doc.tasks[taskId]?.lease;
      if (!lease || !isUnclaimed(lease)) return null;
      const left = Date.parse(lease.expiresAt) - now.getTime();
      byCommit = left < BY_REF_LEASE_LEFT * (Date.parse(lease.expiresAt) - Date.parse(lease.acquiredAt));
      const claimed = byCommit ? null : claimOf(doc);
      return claimed ? claimRecord(claimed.task, now, ttlMs) : null;
    });
    // An Actions run whose holder the dispatcher may have recorded since the state it decided on.
    const seen =
      !byRef.applied && byRef.retries > 0 && runIdOfHolder(holder) ? await store.read() : byRef.snapshot;
    byCommit ||= !byRef.applied && ownLease(seen.doc);
    if (!byCommit) return picked(byRef);
  }
  return picked(await store.update(({ doc }) => claimOf(doc)));

  function ownLease(doc: FleetStateDoc): boolean {
    return doc.tasks[taskId]?.lease?.holder === holder;
  }
}

/** The share of a dispatch's lease still to run for a claim by ref (see claimTaskState). */
const BY_REF_LEASE_LEFT = 3 / 4;

/** The record of a claim by ref of `claimed` (the task as claimLease left it), made at `now`. */
function claimRecord(claimed: Task, now: Date, ttlMs: number): ClaimRecord {
  const lease = claimed.lease!;
  return {
    task: claimed.id,
    dispatchedAt: lease.acquiredAt,
    holder: lease.holder,
    at: now.toISOString(),
    ttlMs,
    ...(claimed.state === "planning" || claimed.state === "running" ? { startIn: claimed.state } : {}),
    ...(lease.process ? { process: lease.process } : {}),
  };
}

/**
 * Whether a beat renews the lease (a state commit) or only looks at the state: renewed once a third of
 * the lease has gone by since the last renewal (less half a beat, for timers), so the lease outlives two
 * missed renewals and a beat more frequent than that costs a read, not a commit.
 */
export function renewalDue(lastBeatAt: string, now: Date, ttlMs: number, everyMs: number): boolean {
  return now.getTime() - Date.parse(lastBeatAt) >= ttlMs / 3 - everyMs / 2;
}

/**
 * While a task runs: every `everyMs` (a third of the lease by default) the state is looked at, and the
 * lease renewed when due (see renewalDue); a beat commits only what changed (a renewal, the run's
 * `alsoDoc`), never an unchanged state. When the task is gone from the state, cancelled or held by
 * someone else, the run's signal aborts (the agent and its sandbox are stopped) and `lost()` says why.
 * `onBeat` runs beside each beat: a transition waiting for the task's next commit joins it.
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
  onBeat?: () => Promise<unknown>;
  /** When the lease was last renewed before the heartbeat starts (the claim's; default: now). */
  renewedAt?: string;
}): {
  signal: AbortSignal;
  lost: () => string | undefined;
  /** When the lease runs out as this run last renewed it (epoch ms). */
  heldUntil: () => number;
  /**
   * Before the run publishes anything: a read of the state now. A task cancelled or taken over stops the
   * run (`signal`, `lost`); a state that cannot be read throws, so nothing is published unconfirmed.
   */
  confirm: () => Promise<void>;
  stop: () => void;
} {
  const { store, taskId, holder, ttlMs, clock } = opts;
  const everyMs = opts.everyMs ?? heartbeatIntervalMs(ttlMs);
  // From the claim's renewal, not the heartbeat's start: a run's checkout and its issue's reading come between.
  let lastRenewal =
    opts.renewedAt && Number.isFinite(Date.parse(opts.renewedAt)) ? opts.renewedAt : clock().toISOString();
  const abort = new AbortController();
  const onOuterAbort = () => abort.abort();
  opts.outer?.addEventListener("abort", onOuterAbort);
  // A listener never hears an abort that came before it (a run started as its worker stopped).
  if (opts.outer?.aborted) abort.abort();
  let lost: string | undefined;
  const beat = async () => {
    let refused: "cancelled" | "gone" | undefined;
    try {
      const now = clock();
      const due = renewalDue(lastRenewal, now, ttlMs, everyMs);
      // Not due: a fresh read shows a cancel or a lost lease; the commit below then carries only a change.
      if (!due) {
        // Any read of this process's store in the last half beat does (a worker's other runs beat too).
        const looked = await store.read({ maxAgeMs: everyMs / 2 });
        const seen = renewLease(looked.doc, taskId, { holder, now, ttlMs });
        refused = seen.ok ? undefined : seen.reason;
      }
      const beatDone =
        !due && !opts.alsoDoc
          ? undefined
          : store.update(({ doc }) => {
              const renewed = renewLease(doc, taskId, { holder, now, ttlMs });
              refused = renewed.ok ? undefined : renewed.reason;
              if (!renewed.ok) return null;
              if (!due)
                return opts.alsoDoc
                  ? { doc: opts.alsoDoc(doc), message: `run of gh-${renewed.task.issue} (${taskId})` }
                  : null;
              return opts.alsoDoc ? { ...renewed, doc: opts.alsoDoc(renewed.doc) } : renewed;
            });
      const [done] = await Promise.all([beatDone, opts.onBeat?.()]);
      if (due && done?.applied) lastRenewal = now.toISOString();
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
  const timer = setInterval(() => void beat(), everyMs);
  timer.unref?.();
  const confirm = async () => {
    let seen: ReturnType<typeof renewLease>;
    try {
      seen = renewLease((await store.read()).doc, taskId, { holder, now: clock(), ttlMs });
    } catch (e) {
      throw new Error(
        `Fleet could not read its state to confirm this run still holds the task, so nothing was pushed (${(e as Error).message}).`,
      );
    }
    if (seen.ok) return;
    lost = seen.reason === "cancelled" ? "cancelled" : "lease lost";
    abort.abort();
  };
  return {
    signal: abort.signal,
    lost: () => lost,
    heldUntil: () => Date.parse(lastRenewal) + ttlMs,
    confirm,
    stop: () => {
      clearInterval(timer);
      opts.outer?.removeEventListener("abort", onOuterAbort);
    },
  };
}
