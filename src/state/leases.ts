import { ACTIVE_STATES, canTransition, transition } from "../core/lifecycle.ts";
import type { Lease, Task } from "../core/task.ts";
import type { FleetStateDoc } from "./doc.ts";

// Pure lease helpers over the state document (no clock: `now` is passed in). They would fit in
// src/core next to the scheduler; they live here until core takes them.

export const DEFAULT_MAX_CONCURRENT = 3;
export const DEFAULT_LEASE_TTL_MS = 10 * 60_000;

const isLive = (lease: Lease, now: Date): boolean => Date.parse(lease.expiresAt) > now.getTime();

/** `max_concurrent` from the document's overrides, else the given default. */
export const maxConcurrentOf = (doc: FleetStateDoc, fallback = DEFAULT_MAX_CONCURRENT): number => {
  const v = doc.config.max_concurrent;
  return typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : fallback;
};

/** Slots held by live leases (an expired lease no longer holds its slot, reclaimed or not). */
export function slotsInUse(doc: FleetStateDoc, now: Date): Map<number, string> {
  const used = new Map<number, string>();
  for (const task of Object.values(doc.tasks)) {
    if (task.lease && isLive(task.lease, now)) used.set(task.lease.slot, task.id);
  }
  return used;
}

export interface ExpireResult {
  doc: FleetStateDoc;
  /** Tasks whose lease had expired: the lease is dropped and, if the task still held a slot, it is back in the queue. */
  expired: Array<{ taskId: string; issue: number; slot: number; holder: string }>;
}

/** Reclaims every lease past its `expiresAt`; a slot-holding task goes back to `queued` for a retry. */
export function expireLeases(doc: FleetStateDoc, now: Date): ExpireResult {
  const expired: ExpireResult["expired"] = [];
  const tasks: Record<string, Task> = { ...doc.tasks };
  for (const [id, task] of Object.entries(doc.tasks)) {
    if (!task.lease || isLive(task.lease, now)) continue;
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

export type AcquireResult =
  | { ok: true; doc: FleetStateDoc; slot: number; of: number; expired: ExpireResult["expired"] }
  | { ok: false; reason: "no-task" | "already-leased" | "no-free-slot"; detail: string };

/**
 * Gives `taskId` the lowest free slot in 1..max_concurrent, reclaiming expired leases first. Never grants
 * more live leases than `max_concurrent`. The task's state is left to the caller (e.g. queued -> dispatched).
 */
export function acquireSlot(doc: FleetStateDoc, taskId: string, opts: AcquireOptions): AcquireResult {
  const task = doc.tasks[taskId];
  if (!task) return { ok: false, reason: "no-task", detail: `no task ${taskId} in the state` };
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
  for (let s = 1; s <= max; s++) {
    if (!used.has(s)) {
      slot = s;
      break;
    }
  }
  if (slot === 0 || used.size >= max) {
    return { ok: false, reason: "no-free-slot", detail: `all ${max} slots are taken` };
  }
  const at = opts.now.toISOString();
  const lease: Lease = {
    holder: opts.holder,
    slot,
    acquiredAt: at,
    heartbeatAt: at,
    expiresAt: new Date(opts.now.getTime() + (opts.ttlMs ?? DEFAULT_LEASE_TTL_MS)).toISOString(),
  };
  return {
    ok: true,
    doc: { ...reclaimed, tasks: { ...reclaimed.tasks, [taskId]: { ...current, lease, updatedAt: at } } },
    slot,
    of: max,
    expired,
  };
}

/** Extends the holder's lease; null when the lease is gone, expired or held by someone else. */
export function heartbeatLease(
  doc: FleetStateDoc,
  taskId: string,
  opts: { holder: string; now: Date; ttlMs?: number },
): FleetStateDoc | null {
  const task = doc.tasks[taskId];
  if (!task?.lease || task.lease.holder !== opts.holder || !isLive(task.lease, opts.now)) return null;
  const lease: Lease = {
    ...task.lease,
    heartbeatAt: opts.now.toISOString(),
    expiresAt: new Date(opts.now.getTime() + (opts.ttlMs ?? DEFAULT_LEASE_TTL_MS)).toISOString(),
  };
  return { ...doc, tasks: { ...doc.tasks, [taskId]: { ...task, lease } } };
}

/** Frees the holder's slot; null when the task holds no lease of that holder (already released or reclaimed). */
export function releaseLease(
  doc: FleetStateDoc,
  taskId: string,
  opts: { holder: string; now: Date },
): FleetStateDoc | null {
  const task = doc.tasks[taskId];
  if (!task?.lease || task.lease.holder !== opts.holder) return null;
  const { lease: _released, ...rest } = task;
  return { ...doc, tasks: { ...doc.tasks, [taskId]: { ...rest, updatedAt: opts.now.toISOString() } } };
}
