import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { lstat, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { GitHub } from "../github/port.ts";
import { createGitStateStore } from "./git-store.ts";
import { createGitHubStateStore } from "./github-store.ts";
import type { StateStore } from "./store.ts";

/**
 * How the state branch is read and written. `git` (default): fetch and push over git's smart HTTP,
 * which spends no REST request and, above all, none of GitHub's 500 content-creating requests an
 * hour (every state commit through the REST API is one). `api`: the REST contents and git data API,
 * for a host without a `git` binary.
 */
export type StateTransport = "git" | "api";

export const STATE_TRANSPORTS: readonly StateTransport[] = ["git", "api"];

export interface RepoStateStoreOptions {
  github: GitHub;
  owner: string;
  repo: string;
  /** Default: `$FLEET_STATE_TRANSPORT`, else `git`. */
  transport?: StateTransport;
  /** The repository's git URL; default derived from the client's API URL (see gitRemoteUrl). */
  gitUrl?: string;
  clock?: () => Date;
  /** See the GitHub store's `pacing`; 0 when the caller already funnels writes through one queue. */
  pacing?: number;
}

export type RepoStateStore = StateStore & {
  history(limit: number): Promise<Array<{ sha: string; message: string; date: string }>>;
};

/** An unknown `$FLEET_STATE_TRANSPORT`: a setting to fix (exit code 1), not a crash. */
export class StateTransportError extends Error {
  readonly exitCode = 1;
  constructor(value: string) {
    super(
      `FLEET_STATE_TRANSPORT="${value}" is not a state transport; use one of: ${STATE_TRANSPORTS.join(", ")}.`,
    );
    this.name = "StateTransportError";
  }
}

/** The transport `$FLEET_STATE_TRANSPORT` names, or `git`; an unknown value is an error that lists the valid ones. */
export function stateTransportFrom(env: NodeJS.ProcessEnv = process.env): StateTransport {
  const v = env.FLEET_STATE_TRANSPORT?.trim();
  if (!v) return "git";
  if ((STATE_TRANSPORTS as readonly string[]).includes(v)) return v as StateTransport;
  throw new StateTransportError(v);
}

/**
 * The git URL of a repository on the host whose REST API is `apiUrl`: github.com for
 * api.github.com, `https://host/owner/repo.git` for GitHub Enterprise Server (`https://host/api/v3`),
 * and the same origin for any other API root (the offline emulator serves git beside its API).
 */
export function gitRemoteUrl(apiUrl: string, owner: string, repo: string): string {
  const u = new URL(apiUrl);
  const path = `/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}.git`;
  if (u.hostname === "api.github.com") return `https://github.com${path}`;
  const root = u.pathname.replace(/\/+$/, "").replace(/\/api\/v3$/, "");
  return `${u.origin}${root}${path}`;
}

/** The REST API's root the git URL is derived from; a client without one needs `gitUrl` given. */
function apiUrlOf(github: GitHub): string {
  if (github.apiUrl) return github.apiUrl;
  throw new Error(
    "The GitHub client has no API URL to derive the state branch's git URL from; pass gitUrl, or use the api transport.",
  );
}

// Cache repositories of this process's git stores: small shallow bare repositories, removed on exit.
const cacheDirs = new Set<string>();
let cleanupArmed = false;
let cacheSeq = 0;
/** Where the cache repositories of every process are (one folder each, named by its pid). */
export const STATE_CACHE_ROOT = join(tmpdir(), "fleet-state-cache");
/** How many dead processes' cache repositories one process removes (see removeStaleCacheDirs). */
const MAX_STALE_REMOVALS = 50;
/** How old a dead process's cache repository is before another process removes it. */
const STALE_CACHE_MS = 60 * 60_000;

function newCacheDir(owner: string, repo: string): string {
  if (!cleanupArmed) {
    cleanupArmed = true;
    process.once("exit", () => {
      for (const d of cacheDirs) rmSync(d, { recursive: true, force: true });
    });
    void removeStaleCacheDirs();
  }
  cacheSeq += 1;
  // Random as well: a pid is reused, and processes in other pid namespaces sharing this folder (containers
  // with one /tmp) have the same ones; a folder a killed process left is never taken for this store's.
  const dir = join(
    STATE_CACHE_ROOT,
    `${owner}-${repo}-${process.pid}-${cacheSeq}-${randomBytes(4).toString("hex")}`,
  );
  cacheDirs.add(dir);
  return dir;
}

/**
 * Removes what killed processes left (SIGKILL, a crash: no exit handler ran): folders of this user,
 * named by a pid no process has, untouched for an hour. Nothing of another user, no symlink, and
 * nothing at all when the root is not this user's alone. In the background, once per process: a
 * failure only leaves them for the next. A folder removed from under a live store (pid namespaces
 * sharing /tmp, a cleaner of the temporary folder) is made again by the store at its next operation.
 */
export async function removeStaleCacheDirs(now = Date.now()): Promise<void> {
  const uid = process.getuid?.();
  if (uid === undefined) return;
  const root = await lstat(STATE_CACHE_ROOT).catch(() => undefined);
  if (!root?.isDirectory() || root.uid !== uid || (root.mode & 0o022) !== 0) return;
  const names = await readdir(STATE_CACHE_ROOT).catch(() => [] as string[]);
  let removed = 0;
  for (const name of names) {
    const pid = Number(/-(\d+)-\d+(?:-[0-9a-f]+)?$/.exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || pidAlive(pid)) continue;
    const dir = join(STATE_CACHE_ROOT, name);
    const entry = await lstat(dir).catch(() => undefined);
    if (!entry?.isDirectory() || entry.uid !== uid || now - entry.mtimeMs < STALE_CACHE_MS) continue;
    await rm(dir, { recursive: true, force: true }).catch(() => {});
    // A one-shot command waits for this before it exits: a long backlog goes a few at a time.
    if (++removed >= MAX_STALE_REMOVALS) return;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: there is such a process, of another user.
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The state store of one repository, over the transport asked for. */
export function createRepoStateStore(opts: RepoStateStoreOptions): RepoStateStore {
  const transport = opts.transport ?? stateTransportFrom();
  if (transport === "api")
    return createGitHubStateStore({
      github: opts.github,
      owner: opts.owner,
      repo: opts.repo,
      clock: opts.clock,
      pacing: opts.pacing,
    });
  const { github } = opts;
  return createGitStateStore({
    url: opts.gitUrl ?? gitRemoteUrl(apiUrlOf(github), opts.owner, opts.repo),
    // An installation token is renewed as it expires, so it is asked for at each fetch and push.
    token: () => github.token(),
    owner: opts.owner,
    repo: opts.repo,
    cacheDir: newCacheDir(opts.owner, opts.repo),
    clock: opts.clock,
    pacing: opts.pacing,
  });
}
