import { createHash } from "node:crypto";
import { claimRefPrefix, parseClaim, serializeClaim } from "../core/claims.ts";
import { BEADS_PATH, STATE_PATH } from "../core/state-doc.ts";
import * as cas from "./cas-store.ts";
import type { HistoryEntry, StateStore } from "./store.ts";

export interface MemoryCommit {
  sha: string;
  parents: string[];
  /** Every file of the commit by path. */
  files: Record<string, string>;
  message: string;
  date: string;
}

/**
 * A repository in memory: branches pointing at commits of files. Stores on it read and compare-and-swap
 * a branch as they would on GitHub, in one process, for tests and benchmarks.
 */
export interface MemoryRepo {
  readonly refs: Map<string, string>;
  readonly commits: Map<string, MemoryCommit>;
  /** Files of the commit a branch points at. */
  files(branch: string): Record<string, string>;
  /** A commit on top of the branch holding exactly `files`, as a person pushing would make (no request counted). */
  push(branch: string, files: Record<string, string>, message: string): string;
  /** A new commit object (not on any branch yet). */
  commit(parents: string[], files: Record<string, string>, message: string, date?: Date): string;
}

export function createMemoryRepo(): MemoryRepo {
  const refs = new Map<string, string>();
  const commits = new Map<string, MemoryCommit>();
  let seq = 0;
  const repo: MemoryRepo = {
    refs,
    commits,
    files: (branch) => ({ ...commits.get(refs.get(branch)!)!.files }),
    commit(parents, files, message, date) {
      seq++;
      // Named by content and a sequence number: the same change twice is two commits.
      const when = (date ?? new Date(Date.UTC(2026, 0, 1, 0, 0, seq))).toISOString();
      const sha = createHash("sha1")
        .update(JSON.stringify([seq, parents, files, message, when]))
        .digest("hex");
      commits.set(sha, { sha, parents, files, message, date: when });
      return sha;
    },
    push(branch, files, message) {
      const parent = refs.get(branch);
      const sha = repo.commit(parent ? [parent] : [], { ...files }, message);
      refs.set(branch, sha);
      return sha;
    },
  };
  return repo;
}

export interface MemoryStateStoreOptions extends cas.BranchStoreOptions {
  repo: MemoryRepo;
  /** Claims by ref, as the git store makes them (core/claims.ts); default: claims by commit. */
  claimRefs?: boolean;
}

/** Round trips to the memory repository: one a read, one a write. */
export interface MemoryStoreStats {
  requests: number;
  reads: number;
  writes: number;
  conflicts: number;
}

export interface MemoryStateStore extends StateStore {
  history(limit: number): Promise<HistoryEntry[]>;
  stats(): MemoryStoreStats;
  resetStats(): void;
  dropCache(): void;
}

// A request's answer comes in a later turn of the event loop, so other stores' requests interleave.
const roundTrip = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A branch of a memory repository: a read is one round trip, a write one commit and one ref swap. */
class MemoryTransport implements cas.CasTransport {
  readonly place: cas.StatePlace & { branch: string };
  reads = 0;
  writes = 0;
  private readonly opts: MemoryStateStoreOptions;

  readonly claimBranch?: string;
  readonly claim?: cas.CasTransport["claim"];

  constructor(opts: MemoryStateStoreOptions) {
    this.opts = opts;
    this.place = cas.branchPlace("memory", opts.branch);
    if (!opts.claimRefs) return;
    this.claimBranch = this.place.branch;
    this.claim = async ({ ref, claim, replaces }) => {
      this.writes++;
      await roundTrip();
      if (opts.repo.refs.get(ref) !== replaces) return { kind: "conflict" };
      const sha = opts.repo.commit([], {}, serializeClaim(claim), opts.clock?.());
      opts.repo.refs.set(ref, sha);
      return { kind: "written", ref: { ref, sha, claim, seenAt: this.now() } };
    };
  }

  private readonly seen = new Map<string, number>();
  private now(): number {
    return (this.opts.clock?.() ?? new Date()).getTime();
  }

  /** The claim refs of the branch, by name (none without `claimRefs`). */
  private claims(): cas.ClaimRef[] | undefined {
    if (this.claimBranch === undefined) return undefined;
    const prefix = claimRefPrefix(this.claimBranch);
    const out: cas.ClaimRef[] = [];
    for (const [ref, sha] of [...this.opts.repo.refs].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      if (!ref.startsWith(prefix)) continue;
      const claim = parseClaim(this.opts.repo.commits.get(sha)!.message);
      if (!this.seen.has(sha)) this.seen.set(sha, this.now());
      out.push({ ref, sha, ...(claim ? { claim } : {}), seenAt: this.seen.get(sha)! });
    }
    return out;
  }

  private at(sha: string): cas.Head {
    const files = this.opts.repo.commits.get(sha)!.files;
    const claims = this.claims();
    return {
      version: sha,
      state: files[STATE_PATH] ?? "",
      beads: files[BEADS_PATH] ?? "",
      ...(claims ? { claims } : {}),
    };
  }

  async read(prev: cas.Head | undefined): Promise<cas.Head> {
    this.reads++;
    await roundTrip();
    const sha = this.opts.repo.refs.get(this.place.branch);
    if (!sha) return { version: "", state: "", beads: "" };
    if (prev?.version !== sha) return this.at(sha);
    const claims = this.claims();
    return !claims || cas.sameClaimRefs(prev.claims ?? [], claims) ? prev : { ...prev, claims };
  }

  async write(
    base: cas.Head,
    files: Partial<cas.StateFiles>,
    message: cas.CommitMessage,
    claimRefs?: cas.ClaimRefChanges,
  ): Promise<cas.WriteOutcome<cas.Head>> {
    this.writes++;
    const { repo, clock } = this.opts;
    const { branch } = this.place;
    await roundTrip();
    // The compare-and-swap: the branch must still be where `base` saw it, and (atomically) each claim
    // ref to create absent, each to remove where it was.
    if ((repo.refs.get(branch) ?? "") !== base.version) return { kind: "conflict" };
    if (claimRefs?.create.some((c) => repo.refs.get(c.ref) !== c.replaces)) return { kind: "conflict" };
    if (claimRefs?.remove.some((r) => repo.refs.get(r.ref) !== r.sha)) return { kind: "conflict" };
    for (const c of claimRefs?.create ?? [])
      repo.refs.set(c.ref, repo.commit([], {}, serializeClaim(c.claim)));
    for (const r of claimRefs?.remove ?? []) repo.refs.delete(r.ref);
    const parent = base.version === "" ? undefined : repo.commits.get(base.version)!;
    const tree = { ...parent?.files };
    if (files.state !== undefined) tree[STATE_PATH] = files.state;
    if (files.beads !== undefined) tree[BEADS_PATH] = files.beads;
    // Commits here are named by a sequence number, never by content alone: no `Fleet-Write` trailer needed.
    const sha = repo.commit(parent ? [parent.sha] : [], tree, message.skipCi, clock?.());
    repo.refs.set(branch, sha);
    return { kind: "written", head: this.at(sha) };
  }

  async history(limit: number): Promise<HistoryEntry[]> {
    const out: HistoryEntry[] = [];
    for (let sha = this.opts.repo.refs.get(this.place.branch); sha && out.length < limit; ) {
      const c = this.opts.repo.commits.get(sha)!;
      out.push({ sha, message: c.message, date: c.date });
      sha = c.parents[0];
    }
    return out;
  }
}

/** The transport alone, for tests that put their own in front of it (a lost answer, a slow write). */
export const createMemoryTransport = (
  opts: MemoryStateStoreOptions,
): cas.CasTransport & { reads: number; writes: number } => new MemoryTransport(opts);

/** A state store on a branch of an in-memory repository: the CAS engine with nothing but memory below it. */
export function createMemoryStateStore(opts: MemoryStateStoreOptions): MemoryStateStore {
  const transport = createMemoryTransport(opts);
  const store = cas.createCasStore(transport, opts);
  return {
    ...store,
    stats: () => ({
      requests: transport.reads + transport.writes,
      reads: transport.reads,
      writes: transport.writes,
      conflicts: store.conflicts(),
    }),
    resetStats() {
      transport.reads = 0;
      transport.writes = 0;
      store.resetConflicts();
    },
  };
}
