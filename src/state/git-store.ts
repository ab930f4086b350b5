import { channel } from "node:diagnostics_channel";
import { type ClaimRecord, claimRefPrefix, parseClaim, serializeClaim } from "../core/claims.ts";
import { BEADS_PATH, STATE_PATH } from "../core/state-doc.ts";
import * as cas from "./cas-store.ts";
import { GIT_NETWORK_ATTEMPTS, GitRemote, IDENTITY, StateGitError } from "./git-remote.ts";
import { defaultSleep, type HistoryEntry, type StateStore } from "./store.ts";

export { GIT_NETWORK_ATTEMPTS, isTransientGitFailure, StateGitError } from "./git-remote.ts";

export interface GitStateStoreOptions extends cas.BranchStoreOptions {
  /** The repository's git URL, e.g. `https://github.com/octo/widgets.git`; no credentials in it. */
  url: string;
  /** An installation (or user) token with contents access; asked for before every fetch and push. */
  token: () => Promise<string> | string;
  owner: string;
  repo: string;
  /** A local bare repository used only by this store (created on first use). */
  cacheDir: string;
  /** Moves of the branch the cache's history may grow by before it is cut back to the head (default TRIM_EVERY). */
  trimEvery?: number;
}

/** Git network operations this store ran; none of them is a REST request. */
export interface GitStoreStats {
  fetches: number;
  pushes: number;
  conflicts: number;
  /** Fetches and pushes run again after a transient failure (5xx, 429, a dropped connection). */
  transientRetries: number;
}

export interface GitStateStore extends StateStore {
  history(limit: number): Promise<HistoryEntry[]>;
  stats(): GitStoreStats;
  resetStats(): void;
  /** Forget the cached snapshot (the next update fetches first). */
  dropCache(): void;
}

/**
 * Every fetch and push of a git state store is published here (a diagnostics channel costs nothing
 * without subscribers): `start` and `end` of each, with why it ran. Benchmarks and operators subscribe
 * to see which transition each git request belongs to.
 */
export const STATE_GIT_CHANNEL = "fleet:state:git";

export interface StateGitEvent {
  phase: "start" | "end";
  /** `owner/repo@branch`. */
  where: string;
  operation: "fetch" | "push";
  /** A fetch: why it ran (a ReadCause, `history`, `push answer lost`); a push: the transition's subject. */
  cause: string;
  /** On `end`: the push was refused because the branch moved (a lost race). */
  rejected?: boolean;
}

const gitChannel = channel(STATE_GIT_CHANNEL);

const REMOTE_REF = "refs/fleet/remote-state";
// Where a fetch leaves the branch's claim refs (core/claims.ts), by the same names under this prefix.
const REMOTE_CLAIMS = "refs/fleet/remote-claims/";
// Where fast-import leaves the commit it made (the push sends the commit itself).
const COMMIT_REF = "refs/fleet/commit";
// Where fast-import makes a claim's commit; the ref is reset at once (see makeCommits).
const CLAIM_COMMIT_REF = "refs/fleet/claim-commit";
/**
 * The parent of every claim commit: an empty commit made the same way everywhere, so its sha is the
 * same in every repository, and kept under a ref of the cache's own so every fetch names it as a commit
 * in common. An orphan claim commit has nothing in common with what a fetch has, so the fetch sent every
 * commit it had as a "have", a request per round (3.7 requests per fetch instead of 2.75 with 20
 * workers); a claim on a state commit pulled that commit's whole history into a cache that first
 * fetched the branch shallow, after it. Dated 2100: the fetch names the newest commits it has first.
 */
const CLAIM_ROOT_REF = "refs/fleet/claim-root";
const CLAIM_ROOT = { message: "Fleet claims", date: "4102444800 +0000" };
// Losing reasons a push reports when another writer moved (or created) the branch first.
const LOST_RACE =
  /stale info|fetch first|non-fast-forward|failed to update ref|cannot lock ref|incorrect old value|already exists|atomic push failed|atomic transaction failed/i;
const GC_EVERY = 500;
/**
 * The cache keeps every state commit it fetched or made (only its first fetch is shallow), so a process
 * that lives for weeks (`fleet serve`, `fleet run`) would keep the branch's whole history since its
 * start, on disk, for each repository. After this many moves of the branch (a read that found it moved
 * counts one, however many commits it brought; a write of this process one) its next read fetches the
 * head shallow again, which cuts the history back to it, and the commits before are pruned.
 */
const TRIM_EVERY = 1_000;
// How git reports a fetch that asked for a commit no ref holds any more (upload-pack ends the answer).
const VANISHED_REF = /not our ref|remote end hung up unexpectedly|unadvertised object/i;
// A failed HTTP request (a 5xx, say) is no vanished ref: it is retried with backoff like any other.
const HTTP_FAILURE = /RPC failed|returned error: \d{3}/i;
// What fast-import says when a commit's parent is not in the repository.
const MISSING_BASE = /not a valid commit/i;
// How far back to look for our commit when a push's answer was lost and the branch moved on since.
const LANDED_DEPTH = 64;

/** One ref of a push: moved to `to` ("" deletes it) if it still points at `expected` ("" = absent). */
interface RefUpdate {
  ref: string;
  expected: string;
  to: string;
}

/**
 * The state branch over git's smart HTTP protocol: a shallow fetch reads it, a push guarded by
 * `--force-with-lease` on the parent commit is the compare-and-swap. No request spends REST limits.
 */
class GitTransport implements cas.CasTransport {
  readonly place: cas.StatePlace;
  readonly claimBranch: string;
  fetches = 0;
  pushes = 0;
  private readonly branchRef: string;
  private readonly claimPrefix: string;
  /** The claim refs the last fetch brought (remote names), with their records; unparsable ones left out. */
  private fetchedClaims: cas.ClaimRef[] = [];
  private readonly git: GitRemote;
  private commitsSinceGc = 0;
  /** Moves of the branch (fetched or pushed) since the cache's history was last cut back, and how many it takes (see TRIM_EVERY). */
  private movesSinceTrim = 0;
  private readonly trimEvery: number;
  private chain: Promise<unknown> = Promise.resolve();
  /**
   * The local copy of the branch was there at the last fetch, so the next asks only for what is new
   * without a `rev-parse` to look (a process each read). Were it gone after all, that fetch would only
   * bring the whole history instead of one commit.
   */
  private localCopySeen = false;
  /** The claims' root is under its ref in the cache repository (see fetchHeadOnce). */
  private claimRootMade = false;
  /** The cache repository this transport's local copy is in (GitRemote.made when it was seen). */
  private cacheMade = 0;
  private readonly opts: GitStateStoreOptions;

  constructor(opts: GitStateStoreOptions) {
    this.opts = opts;
    this.trimEvery = opts.trimEvery ?? TRIM_EVERY;
    const place = cas.branchPlace(`${opts.owner}/${opts.repo}`, opts.branch);
    this.place = place;
    this.branchRef = `refs/heads/${place.branch}`;
    this.claimBranch = place.branch;
    this.claimPrefix = claimRefPrefix(place.branch);
    this.git = new GitRemote({
      url: opts.url,
      token: opts.token,
      cacheDir: opts.cacheDir,
      where: place.where,
      repository: `${opts.owner}/${opts.repo}`,
      random: opts.random ?? Math.random,
      sleep: opts.sleep ?? defaultSleep,
    });
  }

  get transientRetries(): number {
    return this.git.transientRetries;
  }

  resetStats(): void {
    this.fetches = 0;
    this.pushes = 0;
    this.git.transientRetries = 0;
  }

  /** One operation at a time on the cache repository: two git commands on one repo can clash on lock files. */
  around<T>(_op: string, fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Publishes a network operation's start and end on STATE_GIT_CHANNEL. */
  private async traced<T>(
    operation: StateGitEvent["operation"],
    cause: string,
    fn: () => Promise<T>,
  ): Promise<T> {
    if (!gitChannel.hasSubscribers) return fn();
    const event = { where: this.place.where, operation, cause };
    gitChannel.publish({ ...event, phase: "start" } satisfies StateGitEvent);
    let rejected = false;
    try {
      const out = await fn();
      rejected = out === "conflict";
      return out;
    } finally {
      gitChannel.publish({ ...event, phase: "end", rejected } satisfies StateGitEvent);
    }
  }

  async read(prev: cas.Head | undefined, _only?: keyof cas.StateFiles, cause = "read"): Promise<cas.Head> {
    await this.git.init();
    // What this read fetches is in the cache repository as it is now.
    this.cacheRemade();
    // Cut back in a read: no commit of this transport waits in the cache unpushed (operations on the
    // cache run one at a time, see around), so nothing pruned is needed after.
    const trim = this.movesSinceTrim >= this.trimEvery;
    const head = await this.fetchHead(1, cause, trim);
    if (!trim && prev && head !== prev.version) this.movesSinceTrim++;
    if (head === "") return { version: "", state: "", beads: "" };
    const claims = this.fetchedClaims;
    let out: cas.Head;
    // Neither the head nor the claims moved: nothing to re-read.
    if (prev && prev.version === head && cas.sameClaimRefs(prev.claims ?? [], claims)) out = prev;
    else if (prev && prev.version === head) out = { ...prev, claims };
    else out = { version: head, ...(await this.readFiles(head)), claims };
    // Last, once the head's files are read: what comes before it goes.
    if (trim) await this.dropHistory();
    return out;
  }

  /** The branch head, fetched with retries on transient failures. */
  private fetchHead(depth: number, cause: string, shallowAgain = false): Promise<string> {
    return this.git.retrying(() =>
      this.traced("fetch", cause, () => this.fetchHeadOnce(depth, shallowAgain)),
    );
  }

  /**
   * Moves the local copy of the branch to what the server has; "" when the branch does not exist.
   * `shallowAgain`: fetched `depth` deep even with a copy here, which cuts the cache's history back to it.
   */
  private async fetchHeadOnce(depth: number, shallowAgain = false): Promise<string> {
    // With a copy of the branch here, only the commits since are asked for: a shallow fetch (`--depth`)
    // costs a second round of negotiation in the stateless protocol.
    const shallow =
      depth > 1 || shallowAgain || !(this.localCopySeen || (await this.hasLocalCopy()))
        ? [`--depth=${depth}`]
        : [];
    let r = await this.fetchRefs(shallow);
    // Over HTTP the ref advertisement and the pack are two requests: a claim ref deleted in between (a
    // settled claim, see CLAIM_REF_GRACE_MS) leaves its commit in no ref, and the server refuses to send
    // it. The next advertisement no longer lists it.
    if (r.exitCode !== 0 && VANISHED_REF.test(r.stderr) && !HTTP_FAILURE.test(r.stderr))
      r = await this.fetchRefs(shallow);
    if (r.exitCode !== 0) {
      if (/couldn't find remote ref/i.test(r.stderr)) {
        await this.git.run(["update-ref", "-d", REMOTE_REF]);
        this.localCopySeen = false;
        this.fetchedClaims = [];
        return "";
      }
      throw r.fail(r.stderr);
    }
    const head = await this.localRefs();
    this.localCopySeen = true;
    // Fleet's claims are there: the next fetches name their root (fetchRefs), under which new ones come.
    // Not before: a root the server lacks would keep it from "ready". Only a saving: a failure is no
    // failed read, and is not tried again.
    if (!this.claimRootMade && this.fetchedClaims.some((c) => c.claim))
      await this.makeCommits(undefined, [], true).catch(() => {
        this.claimRootMade = true;
      });
    return head;
  }

  private fetchRefs(shallow: string[]) {
    this.fetches++;
    return this.git.remote("fetch", [
      // Protocol v0: the ref advertisement is the first answer, so a fetch that finds the branch
      // unmoved costs one request and one that finds it moved two (v2 adds an ls-refs round trip).
      "-c",
      "protocol.version=0",
      // Over HTTP the first request names up to 16 "have" commits, newest first, and unless the server
      // then has all it needs ("ready": every commit wanted reaches one named) a second names more: 3
      // requests instead of 2. Named are the claims' root (CLAIM_ROOT), the claims the server lists,
      // and the branch as last fetched with a few of its ancestors, skipping back 1, 2, 4, ... (git's
      // default names each one). No commit the server refused is under a ref here: one it lacks among
      // them keeps it from "ready" at that turn. The skipping may put a commit more in the pack
      // (https://git-scm.com/docs/git-config#Documentation/git-config.txt-fetchnegotiationAlgorithm).
      "-c",
      "fetch.negotiationAlgorithm=skipping",
      "fetch",
      "--quiet",
      ...shallow,
      "--no-tags",
      "--no-write-fetch-head",
      "--no-auto-gc",
      // The claims come with the branch, in the same requests (the advertisement lists every ref);
      // --prune drops the local copies of claim refs deleted there.
      "--prune",
      this.git.url,
      `+${this.branchRef}:${REMOTE_REF}`,
      `+${this.claimPrefix}*:${REMOTE_CLAIMS}*`,
    ]);
  }

  /** The local copy of the branch's head, and its claims (into fetchedClaims), in one git process. */
  private async localRefs(): Promise<string> {
    const out = await this.git.must([
      "for-each-ref",
      "--format=%(objectname) %(objecttype) %(refname)%00%(contents:subject)%00",
      REMOTE_REF,
      REMOTE_CLAIMS.slice(0, -1),
    ]);
    const known = new Map(this.fetchedClaims.map((c) => [c.sha, c]));
    const now = this.now();
    let head = "";
    const claims: cas.ClaimRef[] = [];
    const fields = out.split("\0");
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const [sha = "", type, name = ""] = fields[i]!.trim().split(" ");
      if (name === REMOTE_REF) {
        if (type === "commit") head = sha;
        continue;
      }
      const seen = known.get(sha);
      const claim = seen ? seen.claim : parseClaim(fields[i + 1]!);
      claims.push({
        ref: this.claimPrefix + name.slice(REMOTE_CLAIMS.length),
        sha,
        ...(claim ? { claim } : {}),
        seenAt: seen?.seenAt ?? now,
      });
    }
    if (!head)
      throw new Error(
        `Fleet state cache ${this.opts.cacheDir}: ${REMOTE_REF} is not a commit after the fetch`,
      );
    this.fetchedClaims = claims;
    return head;
  }

  /** Whether the cache repository was made (again) since this transport's local copy was in it; notes it is now. */
  private cacheRemade(): boolean {
    if (this.git.made === this.cacheMade) return false;
    this.cacheMade = this.git.made;
    this.localCopySeen = false;
    this.claimRootMade = false;
    return true;
  }

  /** Whether the cache holds a commit of the branch (from a fetch or a push). */
  private async hasLocalCopy(): Promise<boolean> {
    return (
      (await this.git.run(["rev-parse", "--verify", "--quiet", `${REMOTE_REF}^{commit}`])).exitCode === 0
    );
  }

  /** The two files of a commit in one `cat-file --batch` call; a missing file reads as "". */
  private async readFiles(commit: string): Promise<cas.StateFiles> {
    const r = await this.git.run(["cat-file", "--batch"], {
      input: `${commit}:${STATE_PATH}\n${commit}:${BEADS_PATH}\n`,
      buffer: true,
    });
    if (r.exitCode !== 0) throw new Error(`Fleet state cache ${this.opts.cacheDir}: git cat-file failed`);
    const out = Buffer.isBuffer(r.stdout) ? r.stdout : Buffer.from(r.stdout);
    const texts: string[] = [];
    let at = 0;
    for (let i = 0; i < 2; i++) {
      const nl = out.indexOf(10, at);
      const [, type, size] = out.subarray(at, nl).toString("utf8").split(" ");
      at = nl + 1;
      if (type !== "blob") {
        texts.push("");
        continue;
      }
      const n = Number(size);
      texts.push(out.subarray(at, at + n).toString("utf8"));
      at += n + 1;
    }
    return { state: texts[0]!, beads: texts[1]! };
  }

  async write(
    base: cas.Head,
    files: Partial<cas.StateFiles>,
    message: cas.CommitMessage,
    claimRefs?: cas.ClaimRefChanges,
  ): Promise<cas.WriteOutcome<cas.Head>> {
    await this.git.init();
    // The cache repository was made again (its folder was removed): the base commit is not in it. The
    // branch is fetched; moved on since the base, this is a lost race like any other.
    if (this.cacheRemade() && base.version !== "" && (await this.fetchHead(1, "write")) !== base.version)
      return { kind: "conflict" };
    let commits: string[];
    try {
      commits = await this.makeCommits(
        { parent: base.version, files, message: message.unique },
        claimRefs?.create.map((c) => c.claim) ?? [],
      );
    } catch (error) {
      // The base is gone from the cache (its history was cut back after the caller's state was read,
      // and that read failed after): a fresh read first.
      if (base.version !== "" && MISSING_BASE.test((error as Error).message)) return { kind: "stale" };
      throw error;
    }
    const [made, ...claimCommits] = commits;
    // Every transition the commit holds (a batch or a folded transition has one per line).
    const subject = message.text
      .split("\n")
      .map((l) => l.replace(/^- /, "").trim())
      .filter(Boolean)
      .join("; ");
    const creates = claimRefs?.create ?? [];
    const removed = claimRefs?.remove ?? [];
    const extra = [
      ...creates.map((c, i) => ({ ref: c.ref, expected: c.replaces ?? "", to: claimCommits[i]! })),
      ...removed.map((r) => ({ ref: r.ref, expected: r.sha, to: "" })),
    ];
    let pushed: "ok" | "conflict" | undefined;
    try {
      pushed = await this.push(made!, base.version, subject, extra);
    } finally {
      // Not taken (or not known to be): the fetches that follow must not name it (see fetchRefs).
      if (pushed !== "ok") await this.git.run(["update-ref", "-d", COMMIT_REF, made!]).catch(() => undefined);
    }
    if (pushed === "conflict") return { kind: "conflict" };
    const now = this.now();
    const created = creates.map((c, i) => ({
      ref: c.ref,
      sha: claimCommits[i]!,
      claim: c.claim,
      seenAt: now,
    }));
    const gone = new Set([...removed, ...created].map((r) => r.ref));
    return {
      kind: "written",
      head: {
        version: made!,
        state: files.state ?? base.state,
        beads: files.beads ?? base.beads,
        claims: cas.sortRefs([...(base.claims ?? []).filter((r) => !gone.has(r.ref)), ...created]),
      },
    };
  }

  /** Creates the claim's ref (or replaces what it `replaces`): one push, no commit on the branch. */
  async claim(change: cas.ClaimChange, subject: string): Promise<cas.ClaimOutcome> {
    await this.git.init();
    const { ref, claim } = change;
    const expected = change.replaces ?? "";
    const [sha] = await this.makeCommits(undefined, [claim]);
    const won = (): cas.ClaimOutcome => ({
      kind: "written",
      ref: { ref, sha: sha!, claim, seenAt: this.now() },
    });
    for (let attempt = 1; ; attempt++) {
      let failure: StateGitError;
      try {
        const outcome = await this.traced("push", subject, () =>
          this.pushRefs([{ ref, expected, to: sha! }]),
        );
        if (outcome === "ok") return won();
        // Refused because the ref moved: an earlier try of ours may have made it after all.
        if (attempt > 1 && (await this.claimOnServer(ref)) === sha) return won();
        return { kind: "conflict" };
      } catch (error) {
        if (!(error instanceof StateGitError)) throw error;
        failure = error;
      }
      const there = await this.claimOnServer(ref).catch(() => undefined);
      if (there === sha) return won();
      if (there !== undefined && there !== expected) return { kind: "conflict" };
      if (there === undefined || !failure.transient || attempt >= GIT_NETWORK_ATTEMPTS) throw failure;
      await this.git.pause(failure, attempt);
    }
  }

  private now(): number {
    return (this.opts.clock?.() ?? new Date()).getTime();
  }

  /** What a claim ref points at on the server now ("" when it does not exist); fetches the branch. */
  private async claimOnServer(ref: string): Promise<string> {
    await this.fetchHead(1, "claim answer lost");
    return this.fetchedClaims.find((c) => c.ref === ref)?.sha ?? "";
  }

  /**
   * After a shallow fetch of the head (see TRIM_EVERY): the commits before it go. The commit last pushed
   * (COMMIT_REF) would keep them reachable; the next fetch negotiates from the head instead. Only a
   * saving: a failure leaves the history for the next cut.
   */
  private async dropHistory(): Promise<void> {
    // A fetch asks only for the refs that moved when some did: the branch unmoved beside a new claim
    // ref is not fetched again, and nothing was cut. The read after the branch's next move tries again
    // (not every read: on a quiet branch each would be a shallow fetch for nothing).
    const cut = await this.git.run(["rev-list", "--count", "--max-count=2", REMOTE_REF]);
    if (String(cut.stdout).trim() !== "1") {
      this.movesSinceTrim = this.trimEvery - 1;
      return;
    }
    this.movesSinceTrim = 0;
    this.commitsSinceGc = 0;
    await this.git.run(["update-ref", "-d", COMMIT_REF]);
    await this.git.run(["-c", "gc.pruneExpire=now", "-c", "gc.autoDetach=false", "gc", "--quiet"]);
  }

  async afterWrite(_head: cas.Head): Promise<void> {
    // The local copy of the branch (REMOTE_REF) is left behind: the next fetch moves it, and negotiates
    // from the commit just pushed (COMMIT_REF), so a write is no git process more.
    this.movesSinceTrim++;
    this.commitsSinceGc++;
    if (this.commitsSinceGc < GC_EVERY) return;
    this.commitsSinceGc = 0;
    // Every attempt leaves objects behind; prune them now and then, in the foreground.
    await this.git.run(["-c", "gc.auto=1", "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"]);
  }

  /**
   * A commit on top of `parent` (an orphan when the branch does not exist yet) changing `files`, made by
   * one `git fast-import` (blobs, tree from the parent's, commit): a state write is one process here,
   * not six (read-tree, hash-object per file, update-index, write-tree, commit-tree), which under a burst
   * of labels was most of a commit's time. The same process makes each claim's commit, its record the
   * message, on one root commit that is the same in every repository (CLAIM_ROOT). The shas come back
   * in order, the state commit's first.
   */
  private async makeCommits(
    state: { parent: string; files: Partial<cas.StateFiles>; message: string } | undefined,
    claims: readonly ClaimRecord[],
    root = claims.length > 0,
  ): Promise<string[]> {
    const when = `${Math.floor((this.opts.clock?.() ?? new Date()).getTime() / 1000)} +0000`;
    const who = `${IDENTITY.name} <${IDENTITY.email}>`;
    const parts: Buffer[] = [];
    const line = (text: string) => parts.push(Buffer.from(`${text}\n`, "utf8"));
    const data = (text: string) => {
      const bytes = Buffer.from(text, "utf8");
      line(`data ${bytes.length}`);
      parts.push(bytes);
      line("");
    };
    let mark = 0;
    const wanted: number[] = [];
    const commit = (
      ref: string,
      message: string,
      parent: string,
      files: Array<[string, string]>,
      at = when,
    ) => {
      mark++;
      // `reset` first: an orphan commit when there is no parent, whatever the scratch ref held.
      line(`reset ${ref}`);
      line(`commit ${ref}`);
      line(`mark :${mark}`);
      line(`author ${who} ${at}`);
      line(`committer ${who} ${at}`);
      data(`${message}\n`);
      if (parent !== "") line(`from ${parent}`);
      for (const [path, text] of files) {
        line(`M 100644 inline ${path}`);
        data(text);
      }
      line("");
      return mark;
    };
    if (state) {
      const files: Array<[string, string]> = [];
      if (state.files.state !== undefined) files.push([STATE_PATH, state.files.state]);
      if (state.files.beads !== undefined) files.push([BEADS_PATH, state.files.beads]);
      wanted.push(commit(COMMIT_REF, state.message, state.parent, files));
    }
    if (root) {
      const rootMark = commit(CLAIM_ROOT_REF, CLAIM_ROOT.message, "", [], CLAIM_ROOT.date);
      for (const claim of claims)
        wanted.push(commit(CLAIM_COMMIT_REF, serializeClaim(claim), `:${rootMark}`, []));
      // A claim's commit is under no ref here (a reset with no commit leaves the ref as it was): one
      // the server refused would be named by the next fetch (see fetchRefs); one it took, the fetch
      // brings under its claim ref.
      if (claims.length) line(`reset ${CLAIM_COMMIT_REF}`);
    }
    for (const m of wanted) line(`get-mark :${m}`);
    line("done");
    const out = await this.git.must(["fast-import", "--quiet", "--done", "--force", "--date-format=raw"], {
      input: Buffer.concat(parts),
    });
    if (root) this.claimRootMade = true;
    return out.split("\n").filter(Boolean);
  }

  /**
   * Where a commit of ours whose push may have landed without us hearing so stands: on the branch (at
   * its head, or under commits other writers added since), not on it with the branch still at
   * `expected`, or not on it with the branch moved. Fetches the branch.
   */
  private async whereIs(sha: string, expected: string): Promise<"landed" | "unchanged" | "moved"> {
    const head = await this.fetchHead(1, "push answer lost");
    if (head === sha) return "landed";
    if (head === expected) return "unchanged";
    if (head === "") return "moved";
    const deep = await this.fetchHead(LANDED_DEPTH, "push answer lost");
    const r = await this.git.run(["rev-list", `--max-count=${LANDED_DEPTH}`, deep]);
    return r.exitCode === 0 && String(r.stdout).split("\n").includes(sha) ? "landed" : "moved";
  }

  /**
   * The CAS push, tried again after transient failures with the same commit and the same lease, so a
   * change is never applied twice: after each failure, and before calling a retried push's rejection a
   * conflict, the branch is read, and our commit on it counts as written.
   */
  private async push(
    sha: string,
    expected: string,
    subject: string,
    extra: readonly RefUpdate[] = [],
  ): Promise<"ok" | "conflict"> {
    for (let attempt = 1; ; attempt++) {
      let failure: StateGitError;
      try {
        const outcome = await this.traced("push", subject, () =>
          this.pushRefs([{ ref: this.branchRef, expected, to: sha }, ...extra]),
        );
        // An earlier try may have landed after all and been built on since: then the lease fails.
        if (outcome === "conflict" && attempt > 1 && (await this.whereIs(sha, expected)) === "landed")
          return "ok";
        return outcome;
      } catch (error) {
        if (!(error instanceof StateGitError)) throw error;
        failure = error;
      }
      // The connection may have failed after the server took the push.
      const now = await this.whereIs(sha, expected).catch(() => undefined);
      if (now === "landed") return "ok";
      if (!now || !failure.transient || attempt >= GIT_NETWORK_ATTEMPTS) throw failure;
      // Another writer moved the branch and ours is not on it: a lost race, re-applied on fresh state.
      if (now === "moved") return "conflict";
      await this.git.pause(failure, attempt);
    }
  }

  /**
   * Moves each ref to `to` ("" deletes it) only if it still points at `expected` ("" = must not exist):
   * the CAS. More than one ref go in one atomic push: all move or none
   * (https://git-scm.com/docs/git-push#Documentation/git-push.txt---atomic).
   */
  private async pushRefs(updates: readonly RefUpdate[]): Promise<"ok" | "conflict"> {
    this.pushes++;
    const r = await this.git.remote("push", [
      "push",
      "--porcelain",
      "--no-verify",
      ...(updates.length > 1 ? ["--atomic"] : []),
      ...updates.map((u) => `--force-with-lease=${u.ref}:${u.expected}`),
      this.git.url,
      ...updates.map((u) => `${u.to}:${u.ref}`),
    ]);
    const lines = r.stdout.split("\n");
    const statuses = updates.map((u) => lines.find((l) => l.includes(`:${u.ref}\t`)));
    if (r.exitCode === 0 && statuses.every((st) => st && !st.startsWith("!"))) return "ok";
    const refused = statuses.filter((st) => st?.startsWith("!"));
    if (refused.length) {
      const reasons = refused.map((st) => st!.split("\t")[2] ?? "");
      if (reasons.some((reason) => LOST_RACE.test(reason))) return "conflict";
      throw r.fail(`${this.git.shownUrl} rejected the push: ${reasons.join("; ")}`);
    }
    throw r.fail(r.stderr);
  }

  async history(limit: number): Promise<HistoryEntry[]> {
    await this.git.init();
    const head = await this.fetchHead(Math.max(1, limit), "history");
    if (head === "") return [];
    const log = await this.git.must(["log", `--max-count=${limit}`, "--format=%H%x1f%cI%x1f%B%x1e", head]);
    return log
      .split("\x1e")
      .map((rec) => rec.replace(/^\n/, ""))
      .filter(Boolean)
      .map((rec) => {
        const [sha, date, message] = rec.split("\x1f") as [string, string, string];
        return {
          sha,
          message: message.replace(/\s+$/, ""),
          date: new Date(date).toISOString().replace(/\.\d{3}Z$/, "Z"),
        };
      });
  }
}

/**
 * Fleet's repository state on a branch (default `fleet/state`), read and written over git's smart HTTP
 * protocol instead of the REST API: a shallow fetch reads it, a push guarded by `--force-with-lease`
 * on the parent commit is the compare-and-swap. No request spends REST or content-creation limits.
 */
export function createGitStateStore(opts: GitStateStoreOptions): GitStateStore {
  const transport = new GitTransport(opts);
  const store = cas.createCasStore(transport, opts);
  return {
    ...store,
    stats: () => ({
      fetches: transport.fetches,
      pushes: transport.pushes,
      conflicts: store.conflicts(),
      transientRetries: transport.transientRetries,
    }),
    resetStats() {
      transport.resetStats();
      store.resetConflicts();
    },
  };
}
