import type { FleetStateDoc } from "./doc.ts";

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

export interface UpdateOptions {
  maxRetries?: number;
}

export interface StateStore {
  read(): Promise<StateSnapshot>;
  update(mutation: Mutation, opts?: UpdateOptions): Promise<UpdateResult>;
  history?(limit: number): Promise<Array<{ sha: string; message: string; date: string }>>;
}

export const DEFAULT_MAX_RETRIES = 25;

/** Exponential backoff with full jitter: a random delay in [0, min(cap, base * 2^attempt)). */
export function backoffDelay(attempt: number, random: () => number, baseMs = 20, capMs = 1_000): number {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** attempt));
}

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
