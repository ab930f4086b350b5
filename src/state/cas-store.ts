import {
  applyClaim,
  applyClaims,
  CLAIM_REF_GRACE_MS,
  CLOSED_BY_COMMIT,
  type ClaimRecord,
  claimRefName,
  claimSettled,
  dispatchesClosed,
} from "../core/claims.ts";
import {
  cloneStateDoc,
  type FleetStateDoc,
  parseStateDoc,
  STATE_PATH,
  serializeStateDoc,
} from "../core/state-doc.ts";
import { StateConflictError } from "./errors.ts";
import {
  casBackoffDelay,
  DEFAULT_MAX_RETRIES,
  DEFAULT_STATE_BRANCH,
  defaultSleep,
  type HistoryEntry,
  type Mutation,
  type MutationResult,
  type ReadOptions,
  type StateSnapshot,
  type StateStore,
  stateBranchRemedy,
  type UpdateOptions,
  type UpdateResult,
  withoutWriteTrailer,
  withSkipCi,
  withWriteTrailer,
} from "./store.ts";

/** The state's two files as text: `.fleet/state.json` and `.beads/issues.jsonl` ("" when missing). */
export interface StateFiles {
  state: string;
  beads: string;
}

/**
 * The state at one version, as a transport read or wrote it. A transport may carry more in its heads
 * (blob shas, ETags) to read or write the next time; the engine hands them back untouched.
 */
export interface Head extends StateFiles {
  /** The commit (or content hash); "" while the state does not exist yet. */
  version: string;
  /** Claims kept beside the branch (a transport with `claim`): every reader applies them (core/claims.ts). */
  claims?: readonly ClaimRef[];
}

/** A ref under the branch's claims prefix as a transport read it. */
export interface ClaimRef {
  ref: string;
  /** What the ref points at: a delete or a replacement is guarded by it. */
  sha: string;
  /** Its record; undefined when it holds none Fleet reads (kept: its name is still taken). */
  claim?: ClaimRecord;
  /**
   * When this process first saw the ref at this sha, by the store's clock: the refs' grace is counted
   * from it, so neither the claimer's clock nor a claim that waited its turn can shorten it.
   */
  seenAt: number;
}

/**
 * The claim refs a write changes in the same atomic push as the branch: all land or none.
 * `create`: the claims the commit makes (create-only: a claim by ref of the same dispatch made first
 * refuses the push, a lost race). `remove`: refs the branch's document has settled, deleted if still
 * at their sha.
 */
export interface ClaimRefChanges {
  /** `replaces`: the sha of a ref by that name the same read showed, which it replaces (see ClaimChange). */
  create: ClaimChange[];
  remove: ClaimRef[];
}

/**
 * A claim ref to make. Made only where absent, or (`replaces`) where the read that decided it showed a
 * ref by that name that does not claim the dispatch, with the dispatch open on the branch: a close's
 * marker or a record Fleet cannot read, left by a branch that was rewound (a revert, a restore) since
 * markers are made with the commit that closes their dispatch. Left as they are, they would refuse every
 * claim and every close of that dispatch for good.
 */
export interface ClaimChange {
  ref: string;
  claim: ClaimRecord;
  replaces?: string;
}

export type ClaimOutcome = { kind: "written"; ref: ClaimRef } | { kind: "conflict" };

export type WriteOutcome<H extends Head> =
  /** The compare-and-swap won: `head` is the new version. */
  | { kind: "written"; head: H }
  /**
   * Another writer got there first. `file`: the CAS covered only that file (a per-file write), so
   * re-reading it alone is enough to try again; otherwise the whole state is read again.
   */
  | { kind: "conflict"; file?: keyof StateFiles }
  /** The answer was lost (a 5xx): the write may have landed or not. */
  | { kind: "unknown" }
  /** This write needs a full read first (the head's version is older than its files); not a lost race. */
  | { kind: "stale" };

export type StoreOperation = "read" | "update" | "history";

/**
 * Why the engine reads: a caller asked (`read`), an update found no state in memory (`no cache`), a
 * push lost the race (`lost race`), a mutation that did not apply on cached state is checked on fresh
 * state (`confirm`), a transport asked for a full read (`stale`), a write's answer was lost (`lost answer`).
 */
export type ReadCause = "read" | "no cache" | "lost race" | "confirm" | "stale" | "lost answer";

/** Where a state lives, as its errors name it. */
export interface StatePlace {
  /** `owner/repo@branch` or a directory. */
  where: string;
  /** Where the state document lives and what to do when it is corrupt (see StateCorruptError). */
  docPath: string;
  remedy: string;
}

/** The place of the state on `branch` of `repository` (`owner/repo`). */
export function branchPlace(
  repository: string,
  branch = DEFAULT_STATE_BRANCH,
): StatePlace & { branch: string } {
  const where = `${repository}@${branch}`;
  return { branch, where, docPath: `${where}:${STATE_PATH}`, remedy: stateBranchRemedy(branch) };
}

/** A transition's message, in the forms a transport may write it. */
export interface CommitMessage {
  /** As the caller wrote it (a local history line). */
  text: string;
  /** With `[skip ci]` at the end of its subject: every commit on a state branch starts no workflow run. */
  skipCi: string;
  /**
   * `[skip ci]` and a unique `Fleet-Write` trailer: for a commit whose CAS is a ref update, since two
   * writers making the same change on the same parent in the same second would mint the same commit.
   */
  unique: string;
}

const commitMessage = (text: string): CommitMessage => ({
  text,
  skipCi: withSkipCi(text),
  unique: withWriteTrailer(text),
});

/** How one backend reads and compare-and-swaps the state: git, the REST API, a local file, memory. */
export interface CasTransport<H extends Head = Head> {
  readonly place: StatePlace;
  /**
   * true: every update starts from a fresh read instead of the cached state (a transport whose
   * updates hold a lock, so the write never loses and the read is cheap).
   */
  readonly readsFirst?: boolean;
  /**
   * The state now. `prev` is the last head the engine holds (for conditional reads); with `only`, a
   * transport may re-read just that file after losing a per-file CAS on it (the version may then lag).
   * `cause` says why the engine reads (see ReadCause), for the transport's diagnostics.
   */
  read(prev: H | undefined, only?: keyof StateFiles, cause?: ReadCause | string): Promise<H>;
  /**
   * Writes `files` (only those that change; both on the first write) on top of `base`, and only if
   * `base` is still the current version.
   */
  write(
    base: H,
    files: Partial<StateFiles>,
    message: CommitMessage,
    claimRefs?: ClaimRefChanges,
  ): Promise<WriteOutcome<H>>;
  /**
   * Claims by ref (optional): makes the change's ref (absent, or at what it `replaces`), without a
   * commit on the branch (`base`: the branch's version the claim was decided on). A transport with it
   * returns every ref under the claims prefix in `Head.claims` and takes `claimRefs` in its writes.
   */
  claim?(change: ClaimChange, message: string, base: string): Promise<ClaimOutcome>;
  /** The branch the claims are named by (claimRefName), with `claim`. */
  readonly claimBranch?: string;
  /** Housekeeping after a won write, outside the time the write is measured by (for pacing). */
  afterWrite?(head: H): Promise<void>;
  /** Newest first, messages as stored (the engine takes `[skip ci]` and the trailer off). */
  history(limit: number): Promise<HistoryEntry[]>;
  /** Runs each store operation, e.g. one at a time, or under a lock. */
  around?<T>(op: StoreOperation, fn: () => Promise<T>): Promise<T>;
}

export interface CasOptions {
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /**
   * Pacing: after a write that took d ms, the next optimistic write from this store waits a random
   * [0, pacing * d) ms if it comes sooner than that. Without it a store writing in a loop on its own
   * cache (1 round trip) starves stores that lost a CAS and must re-read first (2 round trips).
   * Default 3; 0 turns it off. Bursts from one process belong in `createWriteQueue` anyway.
   */
  pacing?: number;
  /** The commits' date, and the age of claim refs (default: now). */
  clock?: () => Date;
}

/** What every store on a branch takes besides its backend. */
export interface BranchStoreOptions extends CasOptions {
  /** Default `fleet/state`. */
  branch?: string;
}

export interface CasStore extends StateStore {
  claim?: StateStore["claim"];
  history(limit: number): Promise<HistoryEntry[]>;
  /** Writes that lost the compare-and-swap since the last reset. */
  conflicts(): number;
  resetConflicts(): void;
  /** Forget the cached state (the next update reads first). */
  dropCache(): void;
}

interface Cached<H extends Head> {
  head: H;
  /** The branch's own document, parsed. */
  real: FleetStateDoc;
  /** The document every caller sees: `real` with the claim refs applied (the same object without any). */
  doc: FleetStateDoc;
  /** `doc` serialized: a mutation that leaves it as it is writes nothing. */
  docText: string;
}

/** What a mutation's result changes on top of `c`; undefined when it changes nothing. */
interface Change {
  doc: FleetStateDoc;
  files: Partial<StateFiles>;
  state: string;
  beads: string;
  stateChanged: boolean;
  beadsChanged: boolean;
}

function changeOf(c: Cached<Head>, out: MutationResult): Change | undefined {
  const doc = out.doc ?? c.doc;
  const state = serializeStateDoc(doc);
  const beads = out.beads ?? c.head.beads;
  // A missing state.json is not written only because the mutation did not touch the document.
  const stateChanged = state !== c.docText && !(c.head.state === "" && out.doc === undefined);
  const beadsChanged = beads !== c.head.beads;
  // The first write holds both files, so the state always has them.
  const first = c.head.version === "";
  if (!stateChanged && !beadsChanged && !first) return undefined;
  const files = {
    ...(stateChanged || first ? { state } : {}),
    ...(beadsChanged || first ? { beads } : {}),
  };
  return { doc, files, state, beads, stateChanged, beadsChanged };
}

/** A race a write lost: the reads started before it was seen lost, and the one file the transport says moved (else all). */
interface LostRace {
  readsBefore: number;
  only?: keyof StateFiles;
}

/** The cache entry for `head`: its claims applied to `real` (reusing `prev`'s work when nothing changed). */
function withClaimsApplied<H extends Head>(head: H, real: FleetStateDoc, prev?: Cached<H>): Cached<H> {
  const claims = head.claims ?? [];
  if (claims.length === 0) return { head, real, doc: real, docText: head.state };
  if (prev && prev.real === real && sameClaimRefs(prev.head.claims ?? [], claims))
    return { head, real, doc: prev.doc, docText: prev.docText };
  const doc = applyClaims(
    real,
    claims.flatMap((r) => (r.claim ? [r.claim] : [])),
  );
  return { head, real, doc, docText: doc === real ? head.state : serializeStateDoc(doc) };
}

/**
 * How old a cached state a claim may be decided on. A state without some close's marker (a writer over
 * the REST transport makes none) could let a claim win a dispatch already closed: the window stays this
 * short, and the run's heartbeat finds it out later anyway.
 */
const CLAIM_DECIDE_MS = 5_000;

/**
 * The ref change that makes `claim`: where absent, or replacing a ref by that name the branch contradicts
 * (its dispatch open on the branch): a close's marker (a branch rewound by a revert or a restore since
 * the close), and for a commit also a record this version cannot read once it has been seen for the
 * refs' grace (a newer Fleet's claim is never taken by a claim). Only a ref seen in an earlier read than
 * the deciding one: a ref advertisement is no snapshot, so a close's marker may show before its commit.
 */
function claimChange(
  c: Cached<Head>,
  branch: string,
  claim: ClaimRecord,
  o: { byCommit: boolean; earlier: (r: ClaimRef) => boolean; now: number },
): ClaimChange | undefined {
  const ref = claimRefName(branch, claim);
  if (!ref) return undefined;
  const there = c.head.claims?.find((r) => r.ref === ref);
  if (!there) return { ref, claim };
  const marker = there.claim?.holder === CLOSED_BY_COMMIT;
  const unreadable = !there.claim && o.byCommit && o.now - there.seenAt > CLAIM_REF_GRACE_MS;
  // Anything else keeps its name: the push (create-only) is refused, a lost race.
  return (marker || unreadable) && o.earlier(there) ? { ref, claim, replaces: there.sha } : { ref, claim };
}

/** Claim refs in name order (as a transport lists them). */
export const sortRefs = <R extends { ref: string }>(refs: R[]): R[] =>
  refs.sort((a, b) => (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0));

/** Whether two reads showed the same claim refs (each list in name order). */
export const sameClaimRefs = (a: readonly ClaimRef[], b: readonly ClaimRef[]): boolean =>
  a.length === b.length && a.every((r, i) => r.ref === b[i]!.ref && r.sha === b[i]!.sha);

const snapshotOf = (c: Cached<Head>): StateSnapshot => ({
  doc: cloneStateDoc(c.doc),
  beads: c.head.beads,
  version: c.head.version,
});

/**
 * The compare-and-swap loop every state store runs: a mutation is applied to the cached state (one
 * write when nobody else wrote), and after a lost race re-applied on fresh state, with backoff; a
 * mutation that no longer applies is dropped, but only once fresh state confirms it.
 */
class CasEngine<H extends Head> {
  private cache: Cached<H> | undefined;
  private lastWrite = { endedAt: Number.NEGATIVE_INFINITY, tookMs: 0 };
  conflicts = 0;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly pacing: number;
  private readonly t: CasTransport<H>;
  private readonly clock: (() => Date) | undefined;
  /** When the cached state was read, claims and all (a won write keeps the claims of its base's read). */
  private readAt = Number.NEGATIVE_INFINITY;
  /**
   * Where the cached state came from: each read and each won write is numbered as it starts (reads) or
   * lands (writes), and only a newer one replaces the cache, so a read that started before another read or
   * before a write of ours landed never puts an older state back. `cacheWhole`: it came from a read of the
   * whole state (not a write, not one file). `knownBehind`: a write on it lost its race since (the branch
   * has moved on): no update or claim decides on it without reading first.
   */
  private sourcesStarted = 0;
  private cacheSeq = 0;
  private cacheWhole = false;
  private knownBehind = false;
  /** The sources started when `knownBehind` was set: only a whole read started after it clears it. */
  private behindSince = 0;
  /** Reads so far, and the read each claim ref (at its sha) was first in: see claimChange. */
  private reads = 0;
  private readonly firstRead = new Map<string, number>();
  /** Whether a claim ref was already there before the latest read. */
  private readonly seenBefore = (r: ClaimRef): boolean =>
    (this.firstRead.get(`${r.ref}@${r.sha}`) ?? this.reads) < this.reads;

  constructor(t: CasTransport<H>, opts: CasOptions) {
    this.t = t;
    this.clock = opts.clock;
    this.random = opts.random ?? Math.random;
    this.sleep = opts.sleep ?? defaultSleep;
    this.pacing = opts.pacing ?? 3;
  }

  dropCache(): void {
    this.cache = undefined;
  }

  /** The state now, as the engine caches it (not to be changed: copy it, see snapshotOf). */
  readCached(why: string = "read"): Promise<Cached<H>> {
    return this.refresh(why);
  }

  /**
   * The cached state if it was read at most `maxAgeMs` ago (see ReadOptions.maxAgeMs), even when a write
   * has lost on it since: a look, not a decision (updates and claims read first then).
   */
  recent(maxAgeMs: number): Cached<H> | undefined {
    return this.cache && this.readWithin(maxAgeMs) ? this.cache : undefined;
  }

  /** Whether the cached state was read at most `ms` ago (never on a clock gone back). */
  private readWithin(ms: number): boolean {
    const age = this.now() - this.readAt;
    return age >= 0 && age <= ms;
  }

  /** Reads through the transport; the document is parsed again only when its text changed. */
  private async refresh(cause: ReadCause | string, only?: keyof StateFiles): Promise<Cached<H>> {
    const prev = this.cache;
    const startedAt = this.now();
    const seq = ++this.sourcesStarted;
    const head = await this.t.read(prev?.head, only, cause);
    // Parse before caching: a corrupt document must fail every read, not just the first.
    const real =
      prev && prev.head.state === head.state
        ? prev.real
        : parseStateDoc(head.state, this.t.place.docPath, this.t.place.remedy);
    const read = withClaimsApplied(head, real, prev);
    // A newer source replaced the cache while this read ran (a later read, a write of ours landing: the
    // state this read got may lack it): the cache stays. The caller gets a whole read started after its
    // own if there is one, else its own answer (a write's answer may lack a commit this read saw).
    if (this.cache && seq < this.cacheSeq) return this.cacheWhole && only === undefined ? this.cache : read;
    // Read "now" only for the whole state, for what trusts a recent read.
    if (only === undefined) {
      this.readAt = startedAt;
      if (seq > this.behindSince) this.knownBehind = false;
    }
    this.cacheSeq = seq;
    this.cacheWhole = only === undefined;
    this.cache = read;
    this.noteRefs(head.claims ?? []);
    return this.cache;
  }

  private now(): number {
    return (this.clock?.() ?? new Date()).getTime();
  }

  /** A read happened: the refs it showed are noted with it (only those still there are kept). */
  private noteRefs(refs: readonly ClaimRef[]): void {
    this.reads++;
    const keys = new Set(refs.map((r) => `${r.ref}@${r.sha}`));
    for (const k of this.firstRead.keys()) if (!keys.has(k)) this.firstRead.delete(k);
    for (const k of keys) if (!this.firstRead.has(k)) this.firstRead.set(k, this.reads);
  }

  /**
   * The claim refs a write on `c` changes: a ref for each dispatch its change closes (a claim, or the
   * marker of a cancel or reclaim; see dispatchesClosed), and the refs long settled.
   */
  private claimRefChanges(c: Cached<H>, change: Change): ClaimRefChanges | undefined {
    const branch = this.t.claimBranch;
    if (!this.t.claim || branch === undefined) return undefined;
    const now = this.now();
    const create = change.stateChanged
      ? dispatchesClosed(c.doc, change.doc, new Date(now)).flatMap((claim) => {
          const made = claimChange(c, branch, claim, { byCommit: true, earlier: this.seenBefore, now });
          return made ? [made] : [];
        })
      : [];
    // Settled on the branch itself (this write's parent), and seen long enough ago that no reader still
    // acts on a state from before the claim (see CLAIM_REF_GRACE_MS).
    const remove = (c.head.claims ?? []).filter(
      (r) => r.claim && claimSettled(c.real, r.claim) && now - r.seenAt > CLAIM_REF_GRACE_MS,
    );
    return create.length || remove.length ? { create, remove } : undefined;
  }

  /**
   * A claim by ref: decided on the cached state when it is a few seconds old at most (a worker's poll
   * just read it), else on a fresh read, then its ref created if nobody made it first. Deciding on a
   * state that lacks some claim costs only a refused push: the ref is create-only, and every commit that
   * closes a dispatch makes its ref too. A claimer whose state is older than half the refs' grace, once
   * the ref is made, confirms the claim on a fresh read (see CLAIM_REF_GRACE_MS).
   */
  async claim(decide: (doc: FleetStateDoc) => ClaimRecord | null): Promise<UpdateResult> {
    const recent = this.cache && !this.knownBehind && this.now() - this.readAt < CLAIM_DECIDE_MS;
    let c = recent ? this.cache! : await this.refresh("claim");
    const readAt = this.readAt;
    const claim = decide(cloneStateDoc(c.doc));
    const branch = this.t.claimBranch;
    const change =
      claim && branch !== undefined
        ? claimChange(c, branch, claim, { byCommit: false, earlier: this.seenBefore, now: this.now() })
        : undefined;
    const applies = claim && change ? applyClaim(c.doc, claim) : null;
    if (!claim || !change || !applies) return { applied: false, snapshot: snapshotOf(c), retries: 0 };
    const outcome = await this.t.claim!(change, `${applies.message} (by ref)`, c.head.version);
    // Someone made it first: the caller's next read shows whose it is.
    if (outcome.kind === "conflict") {
      this.conflicts++;
      return { applied: false, snapshot: snapshotOf(c), retries: 1 };
    }
    if (this.cache === c) {
      const claims = [...(c.head.claims ?? []).filter((r) => r.ref !== change.ref), outcome.ref];
      c = withClaimsApplied({ ...c.head, claims: sortRefs(claims) }, c.real, c);
      this.cache = c;
    }
    if (this.now() - readAt > CLAIM_REF_GRACE_MS / 2) c = await this.refresh("confirm");
    const task = c.doc.tasks[claim.task];
    const applied = task?.lease?.holder === claim.holder && task.lease.acquiredAt === claim.dispatchedAt;
    return { applied, snapshot: snapshotOf(c), retries: 0, commit: outcome.ref.sha };
  }

  /**
   * A compare-and-swap: the mutation on the cached state, written; a lost race is tried again on fresh
   * state after a backoff. `exclusive` runs each try (its reads and its write) alone on the transport;
   * the backoff between tries is outside it, so this process's reads and claims go on meanwhile, and a
   * whole read one of them made after the loss is the next try's fresh state (no read of its own).
   */
  async update(
    mutation: Mutation,
    options: UpdateOptions = {},
    exclusive: <T>(fn: () => Promise<T>) => Promise<T> = (fn) => fn(),
  ): Promise<UpdateResult> {
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    let retries = 0;
    let lost: LostRace | undefined;
    for (;;) {
      if (retries === 0) await this.pace();
      const tried = await exclusive(() => this.tryOnce(mutation, options, retries, lost));
      if (tried.kind === "done") return tried.result;
      const until = options.retryUntilMs;
      const persisting = retries >= maxRetries;
      if (persisting && !(until !== undefined && this.now() < until))
        throw new StateConflictError(this.t.place.where, retries + 1);
      // Past the usual retries a write that must land backs off as a second try does (the growing
      // backoff only made it the writer least likely to win), and never sleeps past its deadline.
      const delay = persisting
        ? Math.min(casBackoffDelay(1, this.random, this.lastWrite.tookMs), until! - this.now())
        : casBackoffDelay(retries, this.random, this.lastWrite.tookMs);
      await this.sleep(delay);
      retries++;
      lost = tried;
    }
  }

  /** One try of `update`: done, or lost to another writer (the reads started by then, the file the transport says). */
  private async tryOnce(
    mutation: Mutation,
    options: UpdateOptions,
    retries: number,
    lost: LostRace | undefined,
  ): Promise<{ kind: "done"; result: UpdateResult } | ({ kind: "lost" } & LostRace)> {
    let c: Cached<H>;
    let fresh: boolean;
    if (lost) {
      // The cache is a whole read started since the loss (a poll of this process during the backoff):
      // it shows the winner's write, so this try reads nothing of its own.
      const since =
        this.cache !== undefined && !this.knownBehind && this.cacheWhole && this.cacheSeq > lost.readsBefore;
      c = since ? this.cache! : await this.refresh("lost race", lost.only);
      fresh = since || lost.only === undefined;
    } else {
      fresh = this.t.readsFirst === true || this.cache === undefined || this.knownBehind;
      c = fresh ? await this.refresh("no cache") : this.cache!;
    }
    const done = (result: UpdateResult) => ({ kind: "done" as const, result });
    let stales = 0;
    for (;;) {
      const out = mutation({ doc: cloneStateDoc(c.doc), beads: c.head.beads });
      if (out === null) {
        // Only as the update starts: a lost race's re-read may be of one file alone.
        const trust = options.trustCacheMs ?? 0;
        const trusted = !fresh && trust > 0 && retries === 0 && this.readWithin(trust);
        if (fresh || trusted) return done({ applied: false, snapshot: snapshotOf(c), retries });
        // Decided on cached state: make sure it still does not apply before dropping it.
        c = await this.refresh("confirm");
        fresh = true;
        continue;
      }
      const change = changeOf(c, out);
      if (!change) return done({ applied: true, snapshot: snapshotOf(c), retries });
      const started = performance.now();
      const refs = this.claimRefChanges(c, change);
      const outcome = await this.t.write(c.head, change.files, commitMessage(out.message), refs);
      // Once per try: a write that needs a fresh read again right after one counts as a lost race.
      if (outcome.kind === "stale" && ++stales === 1) {
        c = await this.refresh("stale");
        fresh = true;
        continue;
      }
      const ended = performance.now();
      this.lastWrite = { endedAt: ended, tookMs: ended - started };
      if (outcome.kind === "written")
        return done(
          await this.won(outcome.head, change.files.state === undefined ? c.real : change.doc, retries, c),
        );
      if (outcome.kind === "unknown") {
        const landed = await this.landed(change);
        if (landed)
          return done({ applied: true, snapshot: snapshotOf(landed), retries, commit: landed.head.version });
      } else this.conflicts++;
      // The branch moved on from this cache: whatever decides next reads first.
      if (this.cache === c) {
        this.knownBehind = true;
        this.behindSince = this.sourcesStarted;
      }
      return {
        kind: "lost",
        readsBefore: this.sourcesStarted,
        ...(outcome.kind === "conflict" && outcome.file ? { only: outcome.file } : {}),
      };
    }
  }

  /**
   * A store writing in a loop on its cache waits a little, so stores that must re-read first get a turn
   * (before an update's first try, outside its turn on the transport).
   */
  private async pace(): Promise<void> {
    const { endedAt, tookMs } = this.lastWrite;
    if (this.pacing > 0 && performance.now() - endedAt < this.pacing * tookMs) {
      await this.sleep(Math.floor(this.random() * this.pacing * tookMs));
    }
  }

  private async won(head: H, real: FleetStateDoc, retries: number, base: Cached<H>): Promise<UpdateResult> {
    // A read installed while the write was out (a transport without a one-at-a-time turn) may have seen
    // commits the write's state lacks: its time no longer vouches for the cache, which is the write's now.
    if (this.cache !== base) this.readAt = Number.NEGATIVE_INFINITY;
    // A written document holds every claim its base showed; a write of the beads alone left the
    // document, and its claims by ref, as they were (a transport's head lists the refs after the push).
    this.cache = withClaimsApplied(head, real);
    this.cacheSeq = ++this.sourcesStarted;
    this.cacheWhole = false;
    this.knownBehind = false;
    await this.t.afterWrite?.(head);
    return { applied: true, snapshot: snapshotOf(this.cache), retries, commit: head.version };
  }

  /** After a lost answer: the fresh state if it holds exactly what we wrote (the write landed). */
  private async landed(change: Change): Promise<Cached<H> | undefined> {
    const after = await this.refresh("lost answer");
    const state = !change.stateChanged || after.head.state === change.state;
    const beads = !change.beadsChanged || after.head.beads === change.beads;
    return state && beads ? after : undefined;
  }
}

/** A state store over `transport`: the one compare-and-swap engine every backend shares. */
export function createCasStore<H extends Head>(transport: CasTransport<H>, opts: CasOptions = {}): CasStore {
  const engine = new CasEngine(transport, opts);
  const around = <T>(op: StoreOperation, fn: () => Promise<T>): Promise<T> =>
    transport.around ? transport.around(op, fn) : fn();
  // Reads asked for while an earlier one waits its turn share it: it starts after all of them were
  // asked, so it sees every write that happened before any of them (a burst of webhooks costs one fetch).
  // The shared read hands out the engine's cached state, which is never changed in place; each caller
  // gets its own copy.
  let queued: { started: boolean; why: string; state: Promise<Cached<Head>> } | undefined;
  const read = async (opts: ReadOptions = {}): Promise<StateSnapshot> => {
    const recent = opts.maxAgeMs === undefined ? undefined : engine.recent(opts.maxAgeMs);
    if (recent) return snapshotOf(recent);
    const why = opts.why ?? "read";
    let mine = queued;
    if (!mine || mine.started) {
      const entry: { started: boolean; why: string; state: Promise<Cached<Head>> } = {
        started: false,
        why,
        state: Promise.resolve() as never,
      };
      entry.state = around("read", () => {
        entry.started = true;
        return engine.readCached(entry.why);
      });
      queued = entry;
      mine = entry;
    }
    return snapshotOf(await mine.state);
  };
  return {
    read,
    update: (mutation, options) => engine.update(mutation, options, (fn) => around("update", fn)),
    ...(transport.claim ? { claim: (decide) => around("update", () => engine.claim(decide)) } : {}),
    history: (limit) =>
      around("history", async () =>
        (await transport.history(limit)).map((e) => ({ ...e, message: withoutWriteTrailer(e.message) })),
      ),
    conflicts: () => engine.conflicts,
    resetConflicts() {
      engine.conflicts = 0;
    },
    dropCache: () => engine.dropCache(),
  };
}
