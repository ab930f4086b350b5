import { ACTIVE_STATES, canTransition, transition } from "./lifecycle.ts";
import type { Lease, LeaseProcess, Task, TaskState } from "./task.ts";

// Every lease decision, pure (time is passed in): how long a lease lasts, who may claim and renew it,
// when it has expired, which slots it holds. Dispatch, the worker and the reconcile all use these.

/** How long a lease lasts after its last claim or heartbeat. */
export const DEFAULT_LEASE_TTL_MS = 15 * 60_000;
export const DEFAULT_MAX_CONCURRENT = 3;

/**
 * How often a lease holder renews: a third of the lease, so two missed beats are tolerated, and not
 * more often, since a beat is a state commit.
 */
export const heartbeatIntervalMs = (ttlMs = DEFAULT_LEASE_TTL_MS): number => ttlMs / 3;

/** The holder a dispatcher writes on the lease it hands out, until a worker claims it. */
export const dispatchHolder = (mode: string): string => `dispatch:${mode}`;
const UNCLAIMED = /^dispatch:/;
/** Whether a lease is still the dispatcher's, waiting for any worker to claim it. */
export const isUnclaimed = (lease: Lease): boolean => UNCLAIMED.test(lease.holder);

/** The document shape the lease decisions need (Fleet's state document has it). */
export interface LeaseDoc {
  tasks: Record<string, Task>;
  config: { max_concurrent?: number };
}

/** A lease for `holder` on `slot`, taken at `now`. */
export function newLease(holder: string, slot: number, now: Date, ttlMs = DEFAULT_LEASE_TTL_MS): Lease {
  const at = now.toISOString();
  return { holder, slot, acquiredAt: at, heartbeatAt: at, expiresAt: expiryFrom(now, ttlMs) };
}

const expiryFrom = (now: Date, ttlMs: number): string => new Date(now.getTime() + ttlMs).toISOString();

/** A lease is live until its `expiresAt`; from that instant on it is expired and its slot is free. */
export const isLeaseLive = (lease: Lease, now: Date): boolean => Date.parse(lease.expiresAt) > now.getTime();

/** `max_concurrent` from the document's overrides, else the given default. */
export const maxConcurrentOf = (doc: LeaseDoc, fallback = DEFAULT_MAX_CONCURRENT): number => {
  const v = doc.config.max_concurrent;
  return typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : fallback;
};

/** Slots held by live leases (an expired lease no longer holds its slot, reclaimed or not). */
export function slotsInUse(doc: LeaseDoc, now: Date): Map<number, string> {
  const used = new Map<number, string>();
  for (const task of Object.values(doc.tasks)) {
    if (task.lease && isLeaseLive(task.lease, now)) used.set(task.lease.slot, task.id);
  }
  return used;
}

const withTask = <D extends LeaseDoc>(doc: D, task: Task): D => ({
  ...doc,
  tasks: { ...doc.tasks, [task.id]: task },
});

export type ExpiredLeases = Array<{ taskId: string; issue: number; slot: number; holder: string }>;

/** Reclaims every lease past its `expiresAt`; a slot-holding task goes back to `queued` for a retry. */
export function expireLeases<D extends LeaseDoc>(doc: D, now: Date): { doc: D; expired: ExpiredLeases } {
  const expired: ExpiredLeases = [];
  const tasks: Record<string, Task> = { ...doc.tasks };
  for (const [id, task] of Object.entries(doc.tasks)) {
    if (!task.lease || isLeaseLive(task.lease, now)) continue;
    expired.push({ taskId: id, issue: task.issue, slot: task.lease.slot, holder: task.lease.holder });
    const reason = `lease held by ${task.lease.holder} expired at ${task.lease.expiresAt}`;
    if (ACTIVE_STATES.has(task.state) && canTransition(task.state, "queued")) {
      tasks[id] = transition(task, "queued", { now: now.toISOString(), reason });
    } else {
      const { lease: _dropped, ...rest } = task;
      tasks[id] = { ...rest, updatedAt: now.toISOString() };
    }
  }
  return { doc: expired.length ? { ...doc, tasks } : doc, expired };
}

export interface AcquireOptions {
  holder: string;
  now: Date;
  ttlMs?: number;
  /** Used when the document has no `max_concurrent` override. */
  maxConcurrent?: number;
}

export type AcquireResult<D extends LeaseDoc> =
  | { ok: true; doc: D; slot: number; of: number; expired: ExpiredLeases }
  | { ok: false; reason: "no-task" | "already-leased" | "no-free-slot"; detail: string };

/**
 * Gives `taskId` the lowest free slot in 1..max_concurrent, reclaiming expired leases first. Never grants
 * more live leases than `max_concurrent`. The task's state is left to the caller (e.g. queued -> dispatched).
 */
export function acquireSlot<D extends LeaseDoc>(
  doc: D,
  taskId: string,
  opts: AcquireOptions,
): AcquireResult<D> {
  if (!doc.tasks[taskId]) return { ok: false, reason: "no-task", detail: `no task ${taskId} in the state` };
  const { doc: reclaimed, expired } = expireLeases(doc, opts.now);
  const current = reclaimed.tasks[taskId]!;
  if (current.lease) {
    return {
      ok: false,
      reason: "already-leased",
      detail: `${taskId} already holds slot ${current.lease.slot}`,
    };
  }
  const max = maxConcurrentOf(reclaimed, opts.maxConcurrent);
  const used = slotsInUse(reclaimed, opts.now);
  let slot = 0;
  for (let s = 1; s <= max && slot === 0; s++) if (!used.has(s)) slot = s;
  if (slot === 0 || used.size >= max) {
    return { ok: false, reason: "no-free-slot", detail: `all ${max} slots are taken` };
  }
  const lease = newLease(opts.holder, slot, opts.now, opts.ttlMs);
  const leased = { ...current, lease, updatedAt: lease.acquiredAt };
  return { ok: true, doc: withTask(reclaimed, leased), slot, of: max, expired };
}

/** The lease holder of a task's Actions run: `actions:<run id>`. */
export const actionsRunHolder = (runId: string | number): string => `actions:${runId}`;

/** The Actions run a lease holder names (actionsRunHolder); undefined for any other holder. */
export const runIdOfHolder = (holder: string | undefined): string | undefined =>
  /^actions:([1-9]\d*)$/.exec(holder ?? "")?.[1];

export interface ClaimOptions {
  holder: string;
  now: Date;
  ttlMs?: number;
  /** The claiming process, recorded on the lease (see LeaseProcess). */
  process?: LeaseProcess;
  /** The state the claimer starts in (planning or running): claimed and started in one commit. */
  startIn?: (task: Task) => TaskState;
}

/**
 * A worker claims a dispatched task's lease: the lease is the dispatcher's (unclaimed) or already this
 * holder's. The lease keeps its slot, gets `holder` and a fresh expiry; with `startIn` the task moves on
 * in the same change. An Actions run claiming a task whose run id is not recorded yet (the dispatcher
 * died before recording it, or its record is still on the way) records its own: stopping the task then
 * cancels it. null: the task is not dispatched, has no lease, or another worker holds it.
 */
export function claimLease<D extends LeaseDoc>(
  doc: D,
  taskId: string,
  opts: ClaimOptions,
): { doc: D; task: Task; message: string } | null {
  const task = doc.tasks[taskId];
  if (task?.state !== "dispatched" || !task.lease) return null;
  if (task.lease.holder !== opts.holder && !isUnclaimed(task.lease)) return null;
  const at = opts.now.toISOString();
  const lease: Lease = {
    ...task.lease,
    holder: opts.holder,
    heartbeatAt: at,
    expiresAt: expiryFrom(opts.now, opts.ttlMs ?? DEFAULT_LEASE_TTL_MS),
  };
  if (opts.process) lease.process = opts.process;
  else delete lease.process;
  const first = opts.startIn?.(task);
  const runId = task.runId ?? runIdOfHolder(opts.holder);
  const claimed = {
    ...(first ? transition(task, first, { now: at }) : { ...task, updatedAt: at }),
    lease,
    ...(runId ? { runId } : {}),
  };
  const message = `claim gh-${task.issue} (${taskId}) by ${opts.holder} (slot ${task.lease.slot})${first ? `, ${first}` : ""}`;
  return { doc: withTask(doc, claimed), task: claimed, message };
}

/** What a worker has going, as its claims count it against its concurrency. */
export interface WorkerRoom {
  holder: string;
  /** Tasks this worker runs at once. */
  concurrency: number;
  /**
   * The tasks whose runs this worker has going, whatever the document says: a claim under way, or a run
   * whose task left its lease meanwhile (a cancel its heartbeat has not heard yet). They count, and are
   * not taken.
   */
  inHand: ReadonlySet<string>;
  /** Which tasks are this worker's (default: all; local mode runs a worker per repository under one name). */
  accepts?: (task: Task) => boolean;
}

/** The tasks a worker holds or has going: its leases in the document and what it has in hand. */
function heldBy<D extends LeaseDoc>(doc: D, room: WorkerRoom): Set<string> {
  const held = new Set(room.inHand);
  for (const t of Object.values(doc.tasks))
    if (t.lease?.holder === room.holder && (!room.accepts || room.accepts(t))) held.add(t.id);
  return held;
}

/** Whether a worker has room to claim `taskId` too (checked inside the claim's compare-and-swap). */
export function hasRoomFor<D extends LeaseDoc>(doc: D, taskId: string, room: WorkerRoom): boolean {
  const held = heldBy(doc, room);
  held.delete(taskId);
  return held.size < room.concurrency;
}

export interface TakeOptions extends ClaimOptions, WorkerRoom {
  /** The dispatcher's holder whose tasks this worker may take (`dispatch:local`). */
  from: string;
}

/**
 * A worker's commit also claims the dispatched tasks it has room for (a slot its run just freed, which
 * the same commit's scheduling pass dispatched): the claim rides on a commit the worker writes anyway,
 * so the task never waits on the shared head for some worker's poll, and no other worker races for it.
 * Room is `concurrency` less the tasks the document says this holder holds and those in hand.
 * null when nothing is taken.
 */
export function takeDispatched<D extends LeaseDoc>(
  doc: D,
  opts: TakeOptions,
): { doc: D; taken: Task[]; messages: string[] } | null {
  const held = heldBy(doc, opts);
  let room = opts.concurrency - held.size;
  if (room <= 0) return null;
  let out = doc;
  const taken: Task[] = [];
  const messages: string[] = [];
  for (const task of claimOrder(Object.values(doc.tasks), opts.holder)) {
    if (room <= 0) break;
    if (task.state !== "dispatched" || task.lease?.holder !== opts.from || held.has(task.id)) continue;
    if (opts.accepts && !opts.accepts(task)) continue;
    const claimed = claimLease(out, task.id, opts);
    if (!claimed) continue;
    out = claimed.doc;
    taken.push(claimed.task);
    messages.push(claimed.message);
    room--;
  }
  return taken.length ? { doc: out, taken, messages } : null;
}

export type RenewResult<D extends LeaseDoc> =
  | { ok: true; doc: D; task: Task; message: string }
  /** gone: no lease of this holder (reclaimed, released, or the task was removed). */
  | { ok: false; reason: "cancelled" | "gone" };

/**
 * The holder's heartbeat: extends its lease by the TTL from `now`. Refused when the task was cancelled
 * or the lease is gone or someone else's. A lease past `expiresAt` that nobody reclaimed yet is still
 * the holder's (its heartbeats failed for a while, say GitHub was down): renewing it keeps a healthy
 * run going, and once a scheduling pass has reclaimed it the holder finds it gone and stops.
 */
export function renewLease<D extends LeaseDoc>(
  doc: D,
  taskId: string,
  opts: { holder: string; now: Date; ttlMs?: number },
): RenewResult<D> {
  const task = doc.tasks[taskId];
  if (!task?.lease || task.lease.holder !== opts.holder)
    return { ok: false, reason: task?.state === "cancelled" ? "cancelled" : "gone" };
  const lease: Lease = {
    ...task.lease,
    heartbeatAt: opts.now.toISOString(),
    expiresAt: expiryFrom(opts.now, opts.ttlMs ?? DEFAULT_LEASE_TTL_MS),
  };
  const renewed = { ...task, lease };
  const message = `heartbeat gh-${task.issue} (${taskId}) by ${opts.holder}`;
  return { ok: true, doc: withTask(doc, renewed), task: renewed, message };
}

/** Frees the holder's slot; null when the task holds no lease of that holder (already released or reclaimed). */
export function releaseLease<D extends LeaseDoc>(
  doc: D,
  taskId: string,
  opts: { holder: string; now: Date },
): D | null {
  const task = doc.tasks[taskId];
  if (!task?.lease || task.lease.holder !== opts.holder) return null;
  const { lease: _released, ...rest } = task;
  return withTask(doc, { ...rest, updatedAt: opts.now.toISOString() });
}

/**
 * Whether `here` can tell if the lease's process runs: the same machine and boot, the same PID
 * namespace (its pids are ours) and the same user (a /proc mounted with hidepid hides others').
 */
export const canJudgeProcess = (lease: Lease, here: LeaseProcess): boolean =>
  lease.process !== undefined &&
  lease.process.host === here.host &&
  lease.process.bootId === here.bootId &&
  lease.process.pidNs === here.pidNs &&
  lease.process.uid === here.uid;

/**
 * Dispatched tasks in the order `holder` tries to claim them: the longest dispatched first (so none waits
 * behind newer ones until its dispatch runs out), and among those dispatched together an order of its
 * own, a hash of the holder and the task, so workers that each have room for a few of them try
 * different ones first instead of all racing for the same, the losers spending a refused push and a
 * fetch. "Together": the same instant (one commit), or with `togetherMs`, within that long after the
 * longest-waiting one (a burst of labels dispatched in commits a moment apart, which workers' polls
 * find at once); a task still waits behind at most that window's newer tasks.
 */
export function claimOrder<T extends { id: string; lease?: { acquiredAt: string } }>(
  tasks: readonly T[],
  holder: string,
  togetherMs = 0,
): T[] {
  const rank = (id: string): number => {
    // FNV-1a, 32 bits: spread, not secrecy.
    let h = 0x811c9dc5;
    for (const ch of `${holder}\u0000${id}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    return h;
  };
  const since = (t: T) => t.lease?.acquiredAt ?? "";
  // Those dispatched within the window of the oldest share its place; the rest keep their own.
  const oldest =
    togetherMs > 0 ? Math.min(...tasks.map((t) => Date.parse(since(t))).filter(Number.isFinite)) : 0;
  const place = (t: T) => {
    const at = Date.parse(since(t));
    return togetherMs > 0 && Number.isFinite(at) && at - oldest <= togetherMs ? "" : since(t);
  };
  return tasks
    .map((t) => ({ t, at: place(t), r: rank(t.id) }))
    .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.r - b.r || (a.t.id < b.t.id ? -1 : 1)))
    .map((x) => x.t);
}
