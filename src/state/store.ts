import { randomUUID } from "node:crypto";
import type { ClaimRecord } from "../core/claims.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";

export interface StateSnapshot {
  doc: FleetStateDoc;
  /** `.beads/issues.jsonl` text. */
  beads: string;
  /** Commit sha (GitHub) or sha256 of the contents (local); "" while the state does not exist yet. */
  version: string;
}

export interface MutationResult {
  doc?: FleetStateDoc;
  beads?: string;
  /** The commit message: what happened, e.g. "dispatch gh-12 to claude (slot 2/3)". */
  message: string;
}

/**
 * A transition, applied to the freshest state the store has. It may be called several times (once per
 * compare-and-swap attempt), so it must be pure. `null` means it no longer applies: it is dropped.
 */
export type Mutation = (s: { doc: FleetStateDoc; beads: string }) => MutationResult | null;

export interface UpdateResult {
  applied: boolean;
  snapshot: StateSnapshot;
  /** Compare-and-swap attempts that lost and were re-applied on fresh state. */
  retries: number;
  /** The commit (GitHub) or new version (local) that holds the change; absent when nothing changed. */
  commit?: string;
}

export interface ReadOptions {
  why?: string;
  /**
   * A state this store read at most this long ago serves, without a request (default: always read): for
   * a look that many make on one process's store (a running task's heartbeat, `fleet run`'s loop beside
   * its worker's polls), not for a decision that must see the state now.
   */
  maxAgeMs?: number;
}

export interface UpdateOptions {
  maxRetries?: number;
  /**
   * A mutation that does not apply on cached state is dropped only once a fresh read confirms it, unless
   * the cache was read at most this long ago (default 0): for a pass that a later poll repeats anyway
   * (a scheduling pass that finds nothing to start), not for what a person asked.
   */
  trustCacheMs?: number;
  /**
   * Past `maxRetries`, a write that lost its race is tried again until this time (epoch ms, on the
   * store's clock) instead of given up: for a write that must land while something still holds, such as
   * a run's end within its lease, where giving up means the run is lost and its agent runs again. In a
   * write queue, such a write whose batch gave up goes on alone (see createWriteQueue).
   */
  retryUntilMs?: number;
}

/** One state commit (or local history line), newest first in a history. */
export interface HistoryEntry {
  sha: string;
  message: string;
  date: string;
}

export interface StateStore {
  /** The state now. `opts.why` names the read in the store's diagnostics (e.g. a worker's `poll`). */
  read(opts?: ReadOptions): Promise<StateSnapshot>;
  update(mutation: Mutation, opts?: UpdateOptions): Promise<UpdateResult>;
  history?(limit: number): Promise<HistoryEntry[]>;
  /**
   * A claim by ref, where the store keeps claims beside the branch (core/claims.ts): `decide` sees the
   * freshest state and names the claim (null: none); the claim's ref is created only if no one made
   * it first. No commit on the branch: `applied` says the claim is this caller's, `snapshot` shows it.
   */
  claim?(decide: (doc: FleetStateDoc) => ClaimRecord | null): Promise<UpdateResult>;
}

export const DEFAULT_MAX_RETRIES = 25;

/** The branch holding Fleet's state in a repository. */
export const DEFAULT_STATE_BRANCH = "fleet/state";

/** Exponential backoff with full jitter: a random delay in [0, min(cap, base * 2^attempt)). */
export function backoffDelay(attempt: number, random: () => number, baseMs = 20, capMs = 1_000): number {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** attempt));
}

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Backoff after a lost compare-and-swap on a state branch, in units of this store's last write time: a
 * loser retrying sooner than a winner can finish its next write only loses again (each loss costs a
 * re-read and a re-write). On the emulator with 4 writers x 200 transitions: a fixed 20 ms unit cost 5.6
 * requests per transition in 750 s, 4 write times 3.1 in 631 s, 6 write times 2.6 in 538 s.
 */
export function casBackoffDelay(attempt: number, random: () => number, lastWriteMs: number): number {
  const unit = Math.max(20, 6 * lastWriteMs);
  return backoffDelay(attempt, random, unit, Math.max(1_000, unit * 8));
}

// Commits are content-addressed: two writers making the same change on the same parent in the same
// second would mint the same commit and both "win" the CAS. A unique trailer keeps every write distinct.
const WRITE_TRAILER = /\n\nFleet-Write: [0-9a-f-]+\s*$/;

/**
 * Every state commit's subject ends with `[skip ci]`, so a state write starts none of the repository's
 * `on: push` workflows: GitHub skips push and pull_request runs whose head commit says so
 * (https://docs.github.com/en/actions/managing-workflow-runs/skipping-workflow-runs).
 * Measured on the offline GitHub, 3 writes each, with a CI workflow `on: [push, pull_request]`
 * (test/e2e/emulator-state-writes.test.ts): plain messages on a `fleet/state` made from the default
 * branch started 3 runs; with `[skip ci]` 0, over git and over the REST transport alike. Plain
 * messages on an orphan `fleet/state` (as Fleet creates it) started 0, since GitHub reads the
 * workflows of the pushed commit and an orphan holds none, but that protection is gone once the
 * branch carries `.github/` (made by hand from main, say); a ref that is not a branch
 * (`refs/fleet/state`) also started 0. The message was chosen: it holds whatever the branch carries,
 * keeps `fleet/state` a branch (browsable; the contents API of the REST transport writes branches
 * only) and costs no request. It covers push and pull_request only: a workflow `on: create` still
 * sees the branch created, once.
 */
export const SKIP_CI = "[skip ci]";

/** A state commit's message with `[skip ci]` at the end of its subject (every state write uses it). */
export const withSkipCi = (message: string): string => {
  const nl = message.indexOf("\n");
  const subject = nl < 0 ? message : message.slice(0, nl);
  return `${subject ? `${subject} ` : ""}${SKIP_CI}${nl < 0 ? "" : message.slice(nl)}`;
};

/** A state commit's message: the subject marked `[skip ci]`, and its unique `Fleet-Write` trailer. */
export const withWriteTrailer = (message: string): string =>
  `${withSkipCi(message)}\n\nFleet-Write: ${randomUUID()}`;

/** The message as people wrote it: without the `Fleet-Write` trailer and the subject's `[skip ci]`. */
export const withoutWriteTrailer = (message: string): string => {
  const text = message.replace(WRITE_TRAILER, "");
  const nl = text.indexOf("\n");
  const subject = nl < 0 ? text : text.slice(0, nl);
  const cut = subject.endsWith(` ${SKIP_CI}`) ? SKIP_CI.length + 1 : subject === SKIP_CI ? SKIP_CI.length : 0;
  return subject.slice(0, subject.length - cut) + (nl < 0 ? "" : text.slice(nl));
};

/** What to do about a corrupt state document on a state branch. */
export const stateBranchRemedy = (branch: string): string =>
  `fix or revert the last commit on ${branch} (\`git revert\` on that branch, then push), or delete the branch to start over`;
