import { access, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import {
  BEADS_PATH,
  cloneStateDoc,
  type FleetStateDoc,
  parseStateDoc,
  STATE_PATH,
  serializeStateDoc,
} from "./doc.ts";
import { StateConflictError } from "./errors.ts";
import { DEFAULT_STATE_BRANCH } from "./github-store.ts";
import {
  backoffDelay,
  casBackoffDelay,
  DEFAULT_MAX_RETRIES,
  defaultSleep,
  type Mutation,
  type StateSnapshot,
  type StateStore,
  stateBranchRemedy,
  type UpdateOptions,
  type UpdateResult,
  withoutWriteTrailer,
  withWriteTrailer,
} from "./store.ts";

export interface GitStateStoreOptions {
  /** The repository's git URL, e.g. `https://github.com/octo/widgets.git`; no credentials in it. */
  url: string;
  /** An installation (or user) token with contents access; asked for before every fetch and push. */
  token: () => Promise<string> | string;
  owner: string;
  repo: string;
  /** Default `fleet/state`. */
  branch?: string;
  /** A local bare repository used only by this store (created on first use). */
  cacheDir: string;
  clock?: () => Date;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /**
   * Pacing, as in the GitHub store: after a push that took d ms, the next optimistic push from this
   * store waits a random [0, pacing * d) ms if it comes sooner, so a store writing in a loop on its
   * cache does not starve stores that must fetch first. Default 3; 0 turns it off.
   */
  pacing?: number;
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
  history(limit: number): Promise<Array<{ sha: string; message: string; date: string }>>;
  stats(): GitStoreStats;
  resetStats(): void;
  /** Forget the cached snapshot (the next update fetches first). */
  dropCache(): void;
}

/** A fetch or push of the state branch failed for a reason other than losing the race. */
export class StateGitError extends Error {
  override readonly name = "StateGitError";
  constructor(
    readonly where: string,
    readonly operation: "fetch" | "push",
    readonly detail: string,
    /** The HTTP status the server answered (401, 403, 404, ...) when git reported one. */
    readonly status?: number,
    /** A 5xx, a rate limit or a dropped connection: worth trying again (the store already did, several times). */
    readonly transient = false,
  ) {
    super(`Fleet state at ${where}: git ${operation} failed: ${detail}`);
  }
}

interface CachedFile {
  text: string;
}

interface Cache {
  /** Head commit of the branch; "" when the branch does not exist. */
  commit: string;
  state: CachedFile;
  beads: CachedFile;
  doc: FleetStateDoc;
}

const REMOTE_REF = "refs/fleet/remote-state";
const IDENTITY = { name: "Fleet", email: "fleet@users.noreply.github.com" };
// Losing reasons a push reports when another writer moved (or created) the branch first.
const LOST_RACE =
  /stale info|fetch first|non-fast-forward|failed to update ref|cannot lock ref|incorrect old value|already exists/i;
const GC_EVERY = 500;
/** Tries of one fetch or push when it keeps failing transiently; the waits between them add up to 31 s at most. */
export const GIT_NETWORK_ATTEMPTS = 6;
const NETWORK_BACKOFF = { baseMs: 1_000, capMs: 16_000 };
// Rate limits ask for a pause: git does not show Retry-After, so wait at least this long.
const RATE_LIMIT_FLOOR_MS = 1_000;
// How far back to look for our commit when a push's answer was lost and the branch moved on since.
const LANDED_DEPTH = 64;
const HTTP_STATUS = /(?:returned error:|RPC failed; HTTP) (\d{3})/;
const CONNECTION_LOST =
  /Could not resolve host|Failed to connect|Connection reset|Connection refused|Connection timed out|Operation timed out|timed out after|Empty reply from server|RPC failed|early EOF|unexpected disconnect/i;

/** Whether git's stderr shows a failure worth retrying: a 5xx, a rate limit (429, 403 saying so), a lost connection. */
export function isTransientGitFailure(stderr: string): boolean {
  const status = Number(HTTP_STATUS.exec(stderr)?.[1] ?? 0);
  if (status) return status >= 500 || status === 429 || (status === 403 && /rate limit/i.test(stderr));
  if (/could not read Username|Authentication failed|denied to|Permission to/i.test(stderr)) return false;
  return CONNECTION_LOST.test(stderr);
}

/** The environment of every git command: no user or system config, no prompts, nothing inherited from a hook. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("GIT_")) env[k] = v;
  return {
    ...env,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_AUTHOR_NAME: IDENTITY.name,
    GIT_AUTHOR_EMAIL: IDENTITY.email,
    GIT_COMMITTER_NAME: IDENTITY.name,
    GIT_COMMITTER_EMAIL: IDENTITY.email,
  };
}

/**
 * Fleet's repository state on a branch (default `fleet/state`), read and written over git's smart HTTP
 * protocol instead of the REST API: a shallow fetch reads it, a push guarded by `--force-with-lease`
 * on the parent commit is the compare-and-swap. No request spends REST or content-creation limits.
 */
export function createGitStateStore(opts: GitStateStoreOptions): GitStateStore {
  const { owner, repo, cacheDir } = opts;
  const branch = opts.branch ?? DEFAULT_STATE_BRANCH;
  const random = opts.random ?? Math.random;
  const sleep = opts.sleep ?? defaultSleep;
  const pacing = opts.pacing ?? 3;
  const where = `${owner}/${repo}@${branch}`;
  const remedy = stateBranchRemedy(branch);
  const branchRef = `refs/heads/${branch}`;
  const shownUrl = (() => {
    try {
      const u = new URL(opts.url);
      u.username = "";
      u.password = "";
      return u.href;
    } catch {
      return opts.url;
    }
  })();

  let cache: Cache | undefined;
  let stats: GitStoreStats = { fetches: 0, pushes: 0, conflicts: 0, transientRetries: 0 };
  let lastWrite = { endedAt: Number.NEGATIVE_INFINITY, tookMs: 0 };
  let initialized = false;
  let commitsSinceGc = 0;
  let chain: Promise<unknown> = Promise.resolve();

  /** One operation at a time on the cache repository: two git commands on one repo can clash on lock files. */
  function exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = chain.then(fn, fn);
    chain = run.catch(() => undefined);
    return run;
  }

  async function git(
    args: string[],
    o: { input?: string | Buffer; env?: Record<string, string>; buffer?: boolean } = {},
  ) {
    const r = await execa("git", ["-C", cacheDir, ...args], {
      env: { ...baseEnv(), ...o.env },
      extendEnv: false,
      input: o.input,
      reject: false,
      stripFinalNewline: false,
      ...(o.buffer ? { encoding: "buffer" as const } : {}),
    });
    return r;
  }

  async function mustGit(args: string[], o: { input?: string | Buffer; env?: Record<string, string> } = {}) {
    const r = await git(args, o);
    if (r.exitCode !== 0)
      throw new Error(`Fleet state cache ${cacheDir}: git ${args[0]} failed: ${String(r.stderr).trim()}`);
    return String(r.stdout).trim();
  }

  async function init(): Promise<void> {
    if (initialized) return;
    try {
      await access(join(cacheDir, "HEAD"));
    } catch {
      await mkdir(cacheDir, { recursive: true });
      const r = await execa("git", ["init", "--bare", "-q", cacheDir], {
        env: baseEnv(),
        extendEnv: false,
        reject: false,
      });
      if (r.exitCode !== 0)
        throw new Error(`Fleet state cache ${cacheDir}: git init failed: ${r.stderr.trim()}`);
    }
    // Garbage collection runs in the foreground at our pace, never detached next to our own commands.
    await mustGit(["config", "gc.auto", "0"]);
    await mustGit(["config", "maintenance.auto", "false"]);
    initialized = true;
  }

  /** Runs a network command with the token in an HTTP header passed through the environment, never argv or disk. */
  async function remote(operation: "fetch" | "push", args: string[]) {
    const token = await opts.token();
    const header = `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`;
    const r = await git(args, {
      env: { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "http.extraHeader", GIT_CONFIG_VALUE_0: header },
    });
    const scrub = (s: string) =>
      token === "" ? s : s.split(header).join("Authorization: ***").split(token).join("***");
    return {
      exitCode: r.exitCode ?? 1,
      stdout: scrub(String(r.stdout)),
      stderr: scrub(String(r.stderr)),
      fail: (stderr: string): StateGitError => {
        const e = explain(stderr);
        return new StateGitError(where, operation, e.detail, e.status, isTransientGitFailure(stderr));
      },
    };
  }

  /** What went wrong, for a person: never the token, the URL without credentials. */
  function explain(stderr: string): { detail: string; status?: number } {
    const last =
      stderr
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("hint:"))
        .at(-1) ?? "no output from git";
    if (/could not read Username|Authentication failed|returned error: 401/i.test(stderr))
      return {
        status: 401,
        detail: `${shownUrl} refused the token (401): check that it is valid and not expired (${last})`,
      };
    if (/returned error: 403|denied to|Permission to/i.test(stderr))
      return {
        status: 403,
        detail: `${shownUrl} denied access (403): the token needs contents write permission on ${owner}/${repo} (${last})`,
      };
    if (/not found|returned error: 404/i.test(stderr))
      return {
        status: 404,
        detail: `${shownUrl} was not found (404): check the repository name and that the token can see it (${last})`,
      };
    const other = /returned error: (\d{3})/.exec(stderr);
    return { status: other ? Number(other[1]) : undefined, detail: `${shownUrl}: ${last}` };
  }

  /** Waits before try `attempt + 1` of an operation that failed transiently with `error`. */
  async function pause(error: StateGitError, attempt: number): Promise<void> {
    stats.transientRetries++;
    const delay = backoffDelay(attempt - 1, random, NETWORK_BACKOFF.baseMs, NETWORK_BACKOFF.capMs);
    // A transient 403 is a rate limit.
    const rateLimited = error.status === 429 || error.status === 403;
    await sleep(rateLimited ? Math.max(RATE_LIMIT_FLOOR_MS, delay) : delay);
  }

  /** `fn` again after transient failures, with backoff, up to GIT_NETWORK_ATTEMPTS tries; anything else throws at once. */
  async function retrying<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        if (!(error instanceof StateGitError) || !error.transient || attempt >= GIT_NETWORK_ATTEMPTS)
          throw error;
        await pause(error, attempt);
      }
    }
  }

  /** The branch head, fetched with retries on transient failures. */
  const fetchHead = (depth: number): Promise<string> => retrying(() => fetchHeadOnce(depth));

  /** Moves the local copy of the branch to what the server has; "" when the branch does not exist. */
  async function fetchHeadOnce(depth: number): Promise<string> {
    stats.fetches++;
    const r = await remote("fetch", [
      "fetch",
      "--quiet",
      `--depth=${depth}`,
      "--no-tags",
      "--no-write-fetch-head",
      "--no-auto-gc",
      opts.url,
      `+${branchRef}:${REMOTE_REF}`,
    ]);
    if (r.exitCode !== 0) {
      if (/couldn't find remote ref/i.test(r.stderr)) {
        await git(["update-ref", "-d", REMOTE_REF]);
        return "";
      }
      throw r.fail(r.stderr);
    }
    return mustGit(["rev-parse", "--verify", `${REMOTE_REF}^{commit}`]);
  }

  /** The two files of a commit in one `cat-file --batch` call; a missing file reads as "". */
  async function readFiles(commit: string): Promise<{ state: CachedFile; beads: CachedFile }> {
    const r = await git(["cat-file", "--batch"], {
      input: `${commit}:${STATE_PATH}\n${commit}:${BEADS_PATH}\n`,
      buffer: true,
    });
    if (r.exitCode !== 0) throw new Error(`Fleet state cache ${cacheDir}: git cat-file failed`);
    const out = Buffer.from(r.stdout as Uint8Array);
    const files: CachedFile[] = [];
    let at = 0;
    for (let i = 0; i < 2; i++) {
      const nl = out.indexOf(10, at);
      const header = out.subarray(at, nl).toString("utf8");
      at = nl + 1;
      const [, type, size] = header.split(" ");
      if (type !== "blob") {
        files.push({ text: "" });
        continue;
      }
      const n = Number(size);
      files.push({ text: out.subarray(at, at + n).toString("utf8") });
      at += n + 1;
    }
    return { state: files[0]!, beads: files[1]! };
  }

  const parse = (text: string): FleetStateDoc => parseStateDoc(text, `${where}:${STATE_PATH}`, remedy);

  async function refresh(): Promise<Cache> {
    await init();
    const head = await fetchHead(1);
    if (head === "") {
      cache = { commit: "", state: { text: "" }, beads: { text: "" }, doc: parse("") };
      return cache;
    }
    // The head did not move: nothing to re-read or re-parse.
    if (cache && cache.commit === head) return cache;
    const files = await readFiles(head);
    // Parse before caching: a corrupt document must fail every read, not just the first.
    const doc = parse(files.state.text);
    cache = { commit: head, ...files, doc };
    return cache;
  }

  const snapshotOf = (c: Cache): StateSnapshot => ({
    doc: cloneStateDoc(c.doc),
    beads: c.beads.text,
    version: c.commit,
  });

  /** A commit on top of `c` (an orphan holding both files when the branch does not exist yet). */
  async function makeCommit(c: Cache, files: { state?: string; beads?: string }, message: string) {
    const orphan = c.commit === "";
    const indexFile = join(cacheDir, "fleet-index");
    await rm(indexFile, { force: true });
    const env = { GIT_INDEX_FILE: indexFile };
    // Starting from the parent's tree keeps every other file on the branch exactly as it was.
    if (!orphan) await mustGit(["read-tree", c.commit], { env });
    const entries: Array<[path: string, text: string | undefined]> = [
      [STATE_PATH, files.state],
      [BEADS_PATH, files.beads],
    ];
    const lines: string[] = [];
    for (const [path, text] of entries) {
      if (text === undefined) continue;
      const blob = await mustGit(["hash-object", "-w", "--stdin"], { input: Buffer.from(text, "utf8") });
      lines.push(`100644 ${blob}\t${path}`);
    }
    if (lines.length)
      await mustGit(["update-index", "--index-info"], { env, input: `${lines.join("\n")}\n` });
    const tree = await mustGit(["write-tree"], { env });
    await rm(indexFile, { force: true });
    const date = opts.clock ? `${Math.floor(opts.clock().getTime() / 1000)} +0000` : undefined;
    const sha = await mustGit(["commit-tree", tree, ...(orphan ? [] : ["-p", c.commit]), "-F", "-"], {
      input: `${withWriteTrailer(message)}\n`,
      env: date ? { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } : {},
    });
    return sha;
  }

  type PushOutcome = "ok" | "conflict";

  /**
   * Where a commit of ours whose push may have landed without us hearing so stands: on the branch (at
   * its head, or under commits other writers added since), not on it with the branch still at
   * `expected`, or not on it with the branch moved. Fetches the branch.
   */
  async function whereIs(sha: string, expected: string): Promise<"landed" | "unchanged" | "moved"> {
    const head = await fetchHead(1);
    if (head === sha) return "landed";
    if (head === expected) return "unchanged";
    if (head === "") return "moved";
    const deep = await fetchHead(LANDED_DEPTH);
    const r = await git(["rev-list", `--max-count=${LANDED_DEPTH}`, deep]);
    return r.exitCode === 0 && String(r.stdout).split("\n").includes(sha) ? "landed" : "moved";
  }

  /**
   * The CAS push, tried again after transient failures with the same commit and the same lease, so a
   * change is never applied twice: after each failure, and before calling a retried push's rejection a
   * conflict, the branch is read, and our commit on it counts as written.
   */
  async function push(sha: string, expected: string): Promise<PushOutcome> {
    for (let attempt = 1; ; attempt++) {
      let failure: StateGitError;
      try {
        const outcome = await pushOnce(sha, expected);
        // An earlier try may have landed after all and been built on since: then the lease fails.
        if (outcome === "conflict" && attempt > 1 && (await whereIs(sha, expected)) === "landed") return "ok";
        return outcome;
      } catch (error) {
        if (!(error instanceof StateGitError)) throw error;
        failure = error;
      }
      // The connection may have failed after the server took the push.
      const now = await whereIs(sha, expected).catch(() => undefined);
      if (now === "landed") return "ok";
      if (!now || !failure.transient || attempt >= GIT_NETWORK_ATTEMPTS) throw failure;
      // Another writer moved the branch and ours is not on it: a lost race, re-applied on fresh state.
      if (now === "moved") return "conflict";
      await pause(failure, attempt);
    }
  }

  /** Pushes `sha` only if the branch still points at `expected` ("" = must not exist): the CAS. */
  async function pushOnce(sha: string, expected: string): Promise<PushOutcome> {
    stats.pushes++;
    const r = await remote("push", [
      "push",
      "--porcelain",
      "--no-verify",
      `--force-with-lease=${branchRef}:${expected}`,
      opts.url,
      `${sha}:${branchRef}`,
    ]);
    const status = r.stdout.split("\n").find((l) => l.includes(`:${branchRef}\t`));
    if (r.exitCode === 0 && status && !status.startsWith("!")) return "ok";
    if (status?.startsWith("!")) {
      const reason = status.split("\t")[2] ?? "";
      if (LOST_RACE.test(reason)) return "conflict";
      throw r.fail(`${shownUrl} rejected the push: ${reason}`);
    }
    throw r.fail(r.stderr);
  }

  async function maybeGc(): Promise<void> {
    commitsSinceGc++;
    if (commitsSinceGc < GC_EVERY) return;
    commitsSinceGc = 0;
    // Every attempt leaves objects behind; prune them now and then, in the foreground.
    await git(["-c", "gc.auto=1", "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"]);
  }

  async function update(mutation: Mutation, options: UpdateOptions = {}): Promise<UpdateResult> {
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    await init();
    let fresh = cache === undefined;
    let c = cache ?? (await refresh());
    let retries = 0;
    for (;;) {
      const out = mutation({ doc: cloneStateDoc(c.doc), beads: c.beads.text });
      if (out === null) {
        // Decided on cached state: make sure it still does not apply before dropping it.
        if (!fresh) {
          c = await refresh();
          fresh = true;
          continue;
        }
        return { applied: false, snapshot: snapshotOf(c), retries };
      }
      const doc = out.doc ?? c.doc;
      const stateText = serializeStateDoc(doc);
      const beadsText = out.beads ?? c.beads.text;
      const orphan = c.commit === "";
      const stateChanged = stateText !== c.state.text && !(c.state.text === "" && out.doc === undefined);
      const beadsChanged = beadsText !== c.beads.text;
      if (!stateChanged && !beadsChanged && !orphan)
        return { applied: true, snapshot: snapshotOf(c), retries };

      const sinceLast = performance.now() - lastWrite.endedAt;
      if (retries === 0 && pacing > 0 && sinceLast < pacing * lastWrite.tookMs) {
        await sleep(Math.floor(random() * pacing * lastWrite.tookMs));
      }
      const started = performance.now();
      // The first commit holds both files, so the branch always has them.
      const files = {
        ...(stateChanged || orphan ? { state: stateText } : {}),
        ...(beadsChanged || orphan ? { beads: beadsText } : {}),
      };
      const made = await makeCommit(c, files, out.message);
      const outcome = await push(made, c.commit);
      const ended = performance.now();
      lastWrite = { endedAt: ended, tookMs: ended - started };
      if (outcome === "ok") {
        await git(["update-ref", REMOTE_REF, made]);
        cache = {
          commit: made,
          state: files.state !== undefined ? { text: files.state } : c.state,
          beads: files.beads !== undefined ? { text: files.beads } : c.beads,
          doc,
        };
        await maybeGc();
        return { applied: true, snapshot: snapshotOf(cache), retries, commit: made };
      }
      stats.conflicts++;
      if (retries >= maxRetries) throw new StateConflictError(where, retries + 1);
      await sleep(casBackoffDelay(retries, random, lastWrite.tookMs));
      retries++;
      c = await refresh();
      fresh = true;
    }
  }

  return {
    read: () => exclusive(async () => snapshotOf(await refresh())),
    update: (mutation, options) => exclusive(() => update(mutation, options)),
    history: (limit) =>
      exclusive(async () => {
        await init();
        const head = await fetchHead(Math.max(1, limit));
        if (head === "") return [];
        const log = await mustGit(["log", `--max-count=${limit}`, "--format=%H%x1f%cI%x1f%B%x1e", head]);
        return log
          .split("\x1e")
          .map((rec) => rec.replace(/^\n/, ""))
          .filter(Boolean)
          .map((rec) => {
            const [sha, date, message] = rec.split("\x1f") as [string, string, string];
            return {
              sha,
              message: withoutWriteTrailer(message.replace(/\s+$/, "")),
              date: new Date(date).toISOString().replace(/\.\d{3}Z$/, "Z"),
            };
          });
      }),
    stats: () => ({ ...stats }),
    resetStats() {
      stats = { fetches: 0, pushes: 0, conflicts: 0, transientRetries: 0 };
    },
    dropCache() {
      cache = undefined;
    },
  };
}
