import { claimLease, isUnclaimed, type LeaseDoc } from "./leases.ts";
import type { LeaseProcess, Task } from "./task.ts";

// Claims kept beside the state instead of in it. A worker claims a dispatched task by creating a ref
// of its own for that task's dispatch (create-only: one worker wins each dispatch), not by a commit
// on the state branch's one head, which every worker and the app write: twenty workers claiming at
// once made twenty commits race for that head, each loser re-reading and pushing again. Every reader
// of the state applies the claims it finds on top of the branch's document, so a claim counts as
// soon as its ref exists; the next commit anyone writes carries it into the document, and a later
// push deletes the ref. All decisions here are pure; the refs themselves are the state stores'.

/** A worker's claim of one dispatch of a task, as its ref records it. */
export interface ClaimRecord {
  task: string;
  /** The dispatch claimed: its lease's `acquiredAt` (a new dispatch is a new lease, a new claim). */
  dispatchedAt: string;
  holder: string;
  /** When it was claimed: the lease's heartbeat, and its expiry less `ttlMs`. */
  at: string;
  ttlMs: number;
  /** The state the claimer starts in, claimed and started at once (absent: stays dispatched). */
  startIn?: "planning" | "running";
  process?: LeaseProcess;
}

/**
 * How long a claim's ref outlives the commit that carries it: a worker that read the state before the
 * claim (and so saw the task still unclaimed) must not find the ref gone and claim the same dispatch
 * again. A claimer whose read is older than half of this confirms its claim on a fresh read.
 */
export const CLAIM_REF_GRACE_MS = 2 * 60_000;

/**
 * Task ids that can name a ref component (bead ids can, a split's `bd-a1.2` too): git's rules
 * (https://git-scm.com/docs/git-check-ref-format) with a narrower alphabet. Any other id is claimed by commit.
 */
const REF_SAFE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

/** Whether a task can be claimed by ref (its id can name one). */
export const claimableByRef = (taskId: string): boolean =>
  REF_SAFE.test(taskId) && !taskId.includes("..") && !taskId.endsWith(".") && !taskId.endsWith(".lock");

/** The ref of a claim, under `refs/fleet/claims/<state branch>/`; undefined when the task id cannot name one. */
export function claimRefName(
  branch: string,
  claim: Pick<ClaimRecord, "task" | "dispatchedAt">,
): string | undefined {
  const at = Date.parse(claim.dispatchedAt);
  if (!claimableByRef(claim.task) || !Number.isFinite(at)) return undefined;
  return `${claimRefPrefix(branch)}${claim.task}/${at}`;
}

/**
 * Where a state branch's claims live (every ref under it is one claim). GitHub keeps refs outside
 * heads and tags ("Anything in the namespace is returned, not just heads and tags",
 * https://docs.github.com/en/rest/git/refs#list-matching-references; a ref must start with `refs` and
 * have at least two slashes, https://docs.github.com/en/rest/git/refs#create-a-reference), and sends no
 * push event for them (the event is for branches and tags).
 */
export const claimRefPrefix = (branch: string): string => `refs/fleet/claims/${branch}/`;

/** A claim's record as its ref's commit message holds it. */
export const serializeClaim = (claim: ClaimRecord): string => JSON.stringify(claim);

const isText = (v: unknown): v is string => typeof v === "string" && v.length > 0;

/** A claim read back from a ref; undefined when it is not one (a ref someone else made there is ignored). */
export function parseClaim(text: string): ClaimRecord | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const c = v as Record<string, unknown>;
  if (!isText(c.task) || !isText(c.dispatchedAt) || !isText(c.holder) || !isText(c.at)) return undefined;
  if (typeof c.ttlMs !== "number" || !(c.ttlMs > 0) || !Number.isFinite(Date.parse(c.at))) return undefined;
  if (c.startIn !== undefined && c.startIn !== "planning" && c.startIn !== "running") return undefined;
  const p = c.process as Record<string, unknown> | undefined;
  const process =
    p && isText(p.host) && isText(p.bootId) && isText(p.pidNs) && isText(p.start)
      ? typeof p.uid === "number" && typeof p.pid === "number"
        ? (p as unknown as LeaseProcess)
        : undefined
      : undefined;
  return {
    task: c.task,
    dispatchedAt: c.dispatchedAt,
    holder: c.holder,
    at: c.at,
    ttlMs: c.ttlMs,
    ...(c.startIn ? { startIn: c.startIn } : {}),
    ...(process ? { process } : {}),
  };
}

/** Whether `claim` is a claim of the dispatch `doc` shows for its task, still unclaimed there. */
const stillOpen = (doc: LeaseDoc, claim: ClaimRecord): boolean => {
  const task = doc.tasks[claim.task];
  return (
    task?.state === "dispatched" &&
    task.lease !== undefined &&
    isUnclaimed(task.lease) &&
    task.lease.acquiredAt === claim.dispatchedAt
  );
};

/** The claim applied to `doc`, as the commit of it would have been; null when the dispatch is no longer open. */
export function applyClaim<D extends LeaseDoc>(
  doc: D,
  claim: ClaimRecord,
): { doc: D; task: Task; message: string } | null {
  if (claim.holder === CLOSED_BY_COMMIT || !stillOpen(doc, claim)) return null;
  return claimLease(doc, claim.task, {
    holder: claim.holder,
    now: new Date(claim.at),
    ttlMs: claim.ttlMs,
    ...(claim.process ? { process: claim.process } : {}),
    ...(claim.startIn ? { startIn: () => claim.startIn! } : {}),
  });
}

/** Every claim that still applies, applied to `doc` (oldest first; one per dispatch, by its ref). */
export function applyClaims<D extends LeaseDoc>(doc: D, claims: readonly ClaimRecord[]): D {
  let out = doc;
  const ordered = [...claims].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  for (const claim of ordered) out = applyClaim(out, claim)?.doc ?? out;
  return out;
}

/**
 * Whether a claim's ref has done its work on `doc` (the branch's own document): the dispatch it names
 * is no longer open there (the claim is in it, or the task moved on). A ref still open is still needed.
 */
export const claimSettled = (doc: LeaseDoc, claim: ClaimRecord): boolean => !stillOpen(doc, claim);

/** The holder a dispatch's ref names when a commit closed the dispatch without claiming it. */
export const CLOSED_BY_COMMIT = "-";

/**
 * The dispatches a change from `before` to `after` closes, each as the record of its ref: a claim when
 * `after` gives the lease to a worker, else a marker (CLOSED_BY_COMMIT: cancelled, reclaimed, given
 * back). The commit creates these refs in the same atomic push, create-only: a claim by ref of the
 * same dispatch made meanwhile (unseen by the writer) refuses the push, which is then decided again on
 * a state that shows the claim. So no commit can decide on an open dispatch that a worker already has.
 */
export function dispatchesClosed(before: LeaseDoc, after: LeaseDoc, at: Date): ClaimRecord[] {
  const closed: ClaimRecord[] = [];
  for (const [id, was] of Object.entries(before.tasks)) {
    if (was.state !== "dispatched" || !was.lease || !isUnclaimed(was.lease)) continue;
    const now = after.tasks[id];
    const lease = now?.lease;
    const open = { task: id, dispatchedAt: was.lease.acquiredAt };
    if (now && stillOpen(after, { ...open, holder: "", at: "", ttlMs: 1 })) continue;
    if (!lease || isUnclaimed(lease) || lease.acquiredAt !== was.lease.acquiredAt) {
      closed.push({ ...open, holder: CLOSED_BY_COMMIT, at: at.toISOString(), ttlMs: 1 });
      continue;
    }
    const ttlMs = Date.parse(lease.expiresAt) - Date.parse(lease.heartbeatAt);
    closed.push({
      ...open,
      holder: lease.holder,
      at: lease.heartbeatAt,
      ttlMs: ttlMs > 0 ? ttlMs : 1,
      ...(now.state === "planning" || now.state === "running" ? { startIn: now.state } : {}),
      ...(lease.process ? { process: lease.process } : {}),
    });
  }
  return closed;
}
