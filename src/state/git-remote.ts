import { access, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { processEnv, runProgram, stderrOf } from "../process/command-runner.ts";
import { backoffDelay } from "./store.ts";

// Git commands on a state store's cache repository, and its fetches and pushes: the token only in an
// HTTP header passed through the environment, never in argv, a URL or on disk; transient failures
// (5xx, rate limits, dropped connections) tried again with backoff.

/** A fetch or push of the state branch failed for a reason other than losing the race. */
export class StateGitError extends Error {
  override readonly name = "StateGitError";
  readonly where: string;
  readonly operation: "fetch" | "push";
  readonly detail: string;
  readonly status?: number;
  readonly transient: boolean;
  constructor(
    where: string,
    operation: "fetch" | "push",
    detail: string,
    /** The HTTP status the server answered (401, 403, 404, ...) when git reported one. */
    status?: number,
    /** A 5xx, a rate limit or a dropped connection: worth trying again (the store already did, several times). */
    transient = false,
  ) {
    super(`Fleet state at ${where}: git ${operation} failed: ${detail}`);
    this.where = where;
    this.operation = operation;
    this.detail = detail;
    this.status = status;
    this.transient = transient;
  }
}

/** Tries of one fetch or push when it keeps failing transiently; the waits between them add up to 31 s at most. */
export const GIT_NETWORK_ATTEMPTS = 6;
const NETWORK_BACKOFF = { baseMs: 1_000, capMs: 16_000 };
// Rate limits ask for a pause: git does not show Retry-After, so wait at least this long.
const RATE_LIMIT_FLOOR_MS = 1_000;
/** Who Fleet's state commits are by. */
export const IDENTITY = { name: "Fleet", email: "fleet@users.noreply.github.com" };
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
  const env = Object.entries(processEnv()).filter(([k]) => !k.startsWith("GIT_"));
  return {
    ...Object.fromEntries(env),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_AUTHOR_NAME: IDENTITY.name,
    GIT_AUTHOR_EMAIL: IDENTITY.email,
    GIT_COMMITTER_NAME: IDENTITY.name,
    GIT_COMMITTER_EMAIL: IDENTITY.email,
  };
}

/** The URL as a person may see it: without credentials. */
function shownUrlOf(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return u.href;
  } catch {
    return url;
  }
}

export interface GitRemoteOptions {
  /** The repository's git URL; no credentials in it. */
  url: string;
  token: () => Promise<string> | string;
  /** A local bare repository used only by this store (created on first use). */
  cacheDir: string;
  /** For errors: `owner/repo@branch`, and the repository the token needs access to. */
  where: string;
  repository: string;
  random: () => number;
  sleep: (ms: number) => Promise<void>;
}

interface GitRun {
  input?: string | Buffer;
  env?: Record<string, string>;
  buffer?: boolean;
}

/** What git says when the cache repository's folder is gone, or is no repository any more. */
const CACHE_GONE = /cannot change to|not a git repository|not in a git directory/i;

/** The cache repository of one git state store and the remote it fetches from and pushes to. */
export class GitRemote {
  readonly shownUrl: string;
  /** Network operations run again after a transient failure. */
  transientRetries = 0;
  private initialized = false;
  /** How many times the cache repository was made (again): a store's local copy is gone when it grows. */
  made = 0;
  private readonly o: GitRemoteOptions;

  constructor(o: GitRemoteOptions) {
    this.o = o;
    this.shownUrl = shownUrlOf(o.url);
  }

  get url(): string {
    return this.o.url;
  }

  async run(
    args: string[],
    o: GitRun = {},
  ): Promise<{ exitCode: number | null; stdout: string | Buffer; stderr: string }> {
    const r = await runProgram({
      file: "git",
      args: ["-C", this.o.cacheDir, ...args],
      env: { ...baseEnv(), ...o.env },
      ...(o.input !== undefined ? { input: o.input } : {}),
    });
    const stderr = stderrOf(r);
    // The cache repository is gone or broken under us (a cleaner of the temporary folder, another
    // process): the next operation makes it again instead of failing every poll from now on.
    if (r.exitCode !== 0 && CACHE_GONE.test(stderr)) this.initialized = false;
    return { exitCode: r.exitCode, stdout: o.buffer ? r.stdout : r.stdout.toString("utf8"), stderr };
  }

  async must(args: string[], o: { input?: string | Buffer; env?: Record<string, string> } = {}) {
    const r = await this.run(args, o);
    if (r.exitCode !== 0)
      throw new Error(
        `Fleet state cache ${this.o.cacheDir}: git ${args[0]} failed: ${String(r.stderr).trim()}`,
      );
    return String(r.stdout).trim();
  }

  /** Creates the cache repository on first use, and again when it is gone or broken (see run). */
  async init(): Promise<void> {
    if (this.initialized) return;
    const dir = this.o.cacheDir;
    const there = await access(join(dir, "HEAD")).then(
      () => true,
      () => false,
    );
    if (!there) await this.makeRepository();
    // Garbage collection runs in the foreground at our pace, never detached next to our own commands.
    const configured = await this.run(["config", "gc.auto", "0"]);
    if (configured.exitCode !== 0) {
      // A HEAD but no repository (a removal cut short): `git init` makes what is missing.
      if (there && CACHE_GONE.test(String(configured.stderr))) await this.makeRepository();
      await this.must(["config", "gc.auto", "0"]);
    }
    await this.must(["config", "maintenance.auto", "false"]);
    this.initialized = true;
  }

  private async makeRepository(): Promise<void> {
    const dir = this.o.cacheDir;
    await mkdir(dir, { recursive: true });
    const r = await runProgram({ file: "git", args: ["init", "--bare", "-q", dir], env: baseEnv() });
    if (r.exitCode !== 0)
      throw new Error(`Fleet state cache ${dir}: git init failed: ${stderrOf(r).replaceAll("\n", " ")}`);
    this.made++;
  }

  /** Runs a network command with the token in an HTTP header passed through the environment, never argv or disk. */
  async remote(operation: "fetch" | "push", args: string[]) {
    const token = await this.o.token();
    const header = `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`;
    const r = await this.run(args, {
      env: { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "http.extraHeader", GIT_CONFIG_VALUE_0: header },
    });
    const scrub = (s: string) =>
      token === "" ? s : s.split(header).join("Authorization: ***").split(token).join("***");
    return {
      exitCode: r.exitCode ?? 1,
      stdout: scrub(String(r.stdout)),
      stderr: scrub(String(r.stderr)),
      fail: (stderr: string): StateGitError => {
        const e = this.explain(stderr);
        return new StateGitError(this.o.where, operation, e.detail, e.status, isTransientGitFailure(stderr));
      },
    };
  }

  /** What went wrong, for a person: never the token, the URL without credentials. */
  private explain(stderr: string): { detail: string; status?: number } {
    const shown = this.shownUrl;
    const last =
      stderr
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("hint:"))
        .at(-1) ?? "no output from git";
    if (/could not read Username|Authentication failed|returned error: 401/i.test(stderr))
      return {
        status: 401,
        detail: `${shown} refused the token (401): check that it is valid and not expired (${last})`,
      };
    if (/returned error: 403|denied to|Permission to/i.test(stderr))
      return {
        status: 403,
        detail: `${shown} denied access (403): the token needs contents write permission on ${this.o.repository} (${last})`,
      };
    if (/not found|returned error: 404/i.test(stderr))
      return {
        status: 404,
        detail: `${shown} was not found (404): check the repository name and that the token can see it (${last})`,
      };
    const other = /returned error: (\d{3})/.exec(stderr);
    return { status: other ? Number(other[1]) : undefined, detail: `${shown}: ${last}` };
  }

  /** Waits before try `attempt + 1` of an operation that failed transiently with `error`. */
  async pause(error: StateGitError, attempt: number): Promise<void> {
    this.transientRetries++;
    const delay = backoffDelay(attempt - 1, this.o.random, NETWORK_BACKOFF.baseMs, NETWORK_BACKOFF.capMs);
    // A transient 403 is a rate limit.
    const rateLimited = error.status === 429 || error.status === 403;
    await this.o.sleep(rateLimited ? Math.max(RATE_LIMIT_FLOOR_MS, delay) : delay);
  }

  /** `fn` again after transient failures, with backoff, up to GIT_NETWORK_ATTEMPTS tries; anything else throws at once. */
  async retrying<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        if (!(error instanceof StateGitError) || !error.transient || attempt >= GIT_NETWORK_ATTEMPTS)
          throw error;
        await this.pause(error, attempt);
      }
    }
  }
}
