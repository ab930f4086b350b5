import { lstat, readlink } from "node:fs/promises";
import { join } from "node:path";
import { runProgram, stderrOf } from "../../process/command-runner.ts";

export interface GitAuth {
  username: string;
  token: string;
}

// Results must not depend on the machine's git config, and git must never prompt.
const ISOLATED = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", GIT_TERMINAL_PROMPT: "0" };

/** What git needs of the worker's environment: where programs are, the locale, proxies. */
const HOST_BASICS = [
  "PATH",
  "HOME",
  "LANG",
  "LC_ALL",
  "TMPDIR",
  "HTTPS_PROXY",
  "HTTP_PROXY",
  "NO_PROXY",
  "https_proxy",
  "http_proxy",
  "no_proxy",
];
function hostBasics(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of HOST_BASICS) if (process.env[name]) env[name] = process.env[name]!;
  return env;
}

/**
 * Config every Fleet git command runs with, as `-c` flags (never written to any config file):
 * the commit identity, and no hooks or fsmonitor, because the agent could have planted them in
 * the repository and they would run with the worker's environment.
 *
 * Submodules are never looked into: to tell whether a submodule is modified, git runs `git status`
 * inside its folder with the `.git` and config found there, which the agent can create (`git init` in
 * a gitlink's folder) with a `filter.<x>.clean` or other command of its own, and that command would
 * run as the worker, outside the sandbox. `diff.ignoreSubmodules=all` stops that for `status`, `diff`
 * and `checkout`; `commit.status=false` keeps `commit` (also the one `rebase --continue` runs) from
 * writing a status into its message template; no recursion and no submodule summary either. A
 * `.gitmodules` the agent wrote (`ignore = none`) outranks `diff.ignoreSubmodules`, so a status or diff
 * of the worktree also passes `--ignore-submodules=all` (`IGNORE_SUBMODULES`), which nothing outranks.
 */
const FLAGS = [
  "-c",
  "user.name=Fleet",
  "-c",
  "user.email=fleet@users.noreply.github.com",
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "commit.gpgSign=false",
  "-c",
  "diff.ignoreSubmodules=all",
  "-c",
  "submodule.recurse=false",
  "-c",
  "status.submoduleSummary=false",
  "-c",
  "commit.status=false",
  // A `gc --auto` that a fetch or commit starts never prunes worktree registrations (see clearStale).
  "-c",
  "gc.worktreePruneExpire=never",
];

/** For `status` and `diff` of a worktree the agent touched: see FLAGS. */
export const IGNORE_SUBMODULES = "--ignore-submodules=all";

/**
 * Credentials travel in the environment only (git's GIT_CONFIG_COUNT mechanism), so they appear
 * in no argv, no config file and no remote URL.
 */
export function gitAuthEnv(auth?: GitAuth): Record<string, string> {
  if (!auth) return {};
  const basic = Buffer.from(`${auth.username}:${auth.token}`).toString("base64");
  return {
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

export class GitError extends Error {
  readonly args: string[];
  readonly stderr: string;
  constructor(message: string, args: string[], stderr: string) {
    super(message);
    this.args = args;
    this.stderr = stderr;
    this.name = "GitError";
  }
}

export interface GitOptions {
  cwd: string;
  auth?: GitAuth;
  input?: string;
  /** Exit codes that are answers, not failures (e.g. 1 for `diff --quiet`). */
  okCodes?: number[];
}

export async function git(args: string[], opts: GitOptions): Promise<{ stdout: string; exitCode: number }> {
  const r = await runProgram({
    file: "git",
    args: [...FLAGS, ...args],
    cwd: opts.cwd,
    // Not the worker's environment: should git ever run a program (a driver in a repository Fleet
    // did not write), it finds no token, key or OIDC request variables there.
    env: { ...hostBasics(), ...ISOLATED, ...gitAuthEnv(opts.auth) },
    ...(opts.input !== undefined ? { input: opts.input } : {}),
  });
  const code = r.exitCode ?? -1;
  if (code !== 0 && !(opts.okCodes ?? []).includes(code)) {
    const stderr = stderrOf(r);
    throw new GitError(
      `git ${args[0]} failed (exit ${code}): ${stderr.split("\n").slice(-3).join(" ")}`,
      args,
      stderr,
    );
  }
  return { stdout: stripFinalNewline(r.stdout.toString("utf8")), exitCode: code };
}

/** What execa's stripFinalNewline did: one trailing newline (LF or CRLF) off. */
const stripFinalNewline = (s: string): string =>
  s.endsWith("\r\n") ? s.slice(0, -2) : s.endsWith("\n") ? s.slice(0, -1) : s;

/** A task's worktree as Fleet's own git commands address it. */
export interface WorktreeGitDirs {
  /** The checkout the agent works in. */
  path: string;
  /** The worktree's admin folder inside the cache clone (HEAD, index, rebase state): never writable by the agent. */
  gitDir: string;
  /** What setup made, as gitignore patterns (outside the worktree): never the agent's change. */
  excludesFile?: string;
}

/**
 * Git on a task's worktree as Fleet runs it: the admin folder and the work tree named explicitly, so a
 * `.git` the agent rewrote (pointing at a repository and config of its own, with `insteadOf`,
 * `core.fsmonitor` or filter drivers) is never read. The config git reads is the cache clone's, which
 * the agent's sandbox shows read-only.
 */
export function gitIn(
  wt: WorktreeGitDirs,
  args: string[],
  opts: Omit<GitOptions, "cwd"> = {},
): Promise<{ stdout: string; exitCode: number }> {
  const excludes = wt.excludesFile ? ["-c", `core.excludesFile=${wt.excludesFile}`] : [];
  return git([...excludes, "--git-dir", wt.gitDir, "--work-tree", wt.path, ...args], {
    ...opts,
    cwd: wt.path,
  });
}

/**
 * What each worktree path holds, as an id to compare with the same path at another moment: a regular
 * file's blob id (unfiltered), a symlink's target, "" for anything else or a path reached through a
 * link. Only a regular file is ever opened, and no link is followed: the agent may have left a link to
 * a host file or device, or a FIFO that never answers, where a tracked file was.
 */
export async function contentIdsOf(wt: WorktreeGitDirs, paths: readonly string[]): Promise<string[]> {
  const ids: string[] = [];
  const files: Array<{ at: number; path: string }> = [];
  for (const [i, path] of paths.entries()) {
    const info = await lstatBelow(wt.path, path);
    if (info?.isFile()) files.push({ at: i, path });
    ids.push(info?.isSymbolicLink() ? `symlink:${await readlink(join(wt.path, path))}` : "");
  }
  if (files.length) {
    const hashes = (
      await gitIn(wt, ["hash-object", "--no-filters", "--", ...files.map((f) => f.path)])
    ).stdout.split("\n");
    for (const [k, f] of files.entries()) ids[f.at] = hashes[k] ?? "";
  }
  return ids;
}

/** lstat of `rel` below `root`, undefined when it is missing or a folder on the way is not a real one. */
export async function lstatBelow(root: string, rel: string) {
  const parts = rel.split("/").filter(Boolean);
  let at = root;
  for (const [i, part] of parts.entries()) {
    at = join(at, part);
    const info = await lstat(at).catch(() => undefined);
    if (!info || i === parts.length - 1) return info;
    if (!info.isDirectory()) return undefined;
  }
  return undefined;
}
