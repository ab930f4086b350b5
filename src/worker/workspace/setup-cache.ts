import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { execa } from "execa";
import { safeSegment } from "./artifacts.ts";
import { gitIn, type WorktreeGitDirs } from "./git.ts";

/**
 * `setup_cache`: folders setup made (node_modules, .venv, target), kept between tasks on this worker
 * under `<workDir>/setup-cache/<repository>/<key>/`, where the key is the hash of the setup commands
 * and of every lockfile of the commit. A cache is saved only from a setup that ran on the default
 * branch's commit before any agent (so it holds nothing an agent wrote) and restored only for the same
 * key; the worktree gets a copy, so what an agent then changes in it never reaches the cache.
 */

/** Lockfiles of common ecosystems, anywhere in the repository: they decide what setup installs. */
const LOCKFILES = new Set([
  "package-lock.json",
  "npm-shrinkwrap.json",
  "yarn.lock",
  "pnpm-lock.yaml",
  "bun.lockb",
  "bun.lock",
  "Cargo.lock",
  "go.sum",
  "poetry.lock",
  "Pipfile.lock",
  "uv.lock",
  "pdm.lock",
  "requirements.txt",
  "Gemfile.lock",
  "composer.lock",
  "gradle.lockfile",
  "packages.lock.json",
  "mix.lock",
  "pubspec.lock",
  "Package.resolved",
]);
/** Keys kept per repository: older ones are removed when a new one is saved. */
const KEYS_KEPT = 2;
const COMPLETE = ".complete";

/** The cache key of a setup: its commands and the blobs of the commit's lockfiles (no file is read). */
export async function setupCacheKey(wt: WorktreeGitDirs, commands: readonly string[]): Promise<string> {
  const { stdout } = await gitIn(wt, ["ls-tree", "-r", "-z", "HEAD"]);
  const hash = createHash("sha256").update(JSON.stringify(commands));
  for (const entry of stdout.split("\0")) {
    const tab = entry.indexOf("\t");
    const path = entry.slice(tab + 1);
    if (tab > 0 && LOCKFILES.has(path.slice(path.lastIndexOf("/") + 1))) hash.update(`\0${entry}`);
  }
  return hash.digest("hex").slice(0, 32);
}

const cacheDir = (workDir: string, repo: string) =>
  join(workDir, "setup-cache", safeSegment(repo.replace("/", "_")));

/**
 * Copies the cached folders of `key` into the worktree. False when there is no complete cache for it,
 * or a folder's place in the worktree is taken or reached through a link (nothing is written then).
 */
export async function restoreSetupCache(
  workDir: string,
  repo: string,
  key: string,
  worktree: string,
  folders: readonly string[],
): Promise<boolean> {
  const dir = join(cacheDir(workDir, repo), key);
  if (!(await stat(join(dir, COMPLETE)).catch(() => undefined))) return false;
  for (const folder of folders) if (!(await freePlace(worktree, folder))) return false;
  for (const [i, folder] of folders.entries()) {
    const saved = join(dir, String(i));
    if (!(await lstat(saved).catch(() => undefined))) continue;
    await mkdir(dirname(join(worktree, folder)), { recursive: true });
    await copyTree(saved, join(worktree, folder));
  }
  return true;
}

/**
 * Saves the worktree's `folders` under `key` (each that setup made as a plain folder, reached through
 * no link: `a` made a link to a worker's folder would have `a/node_modules` copied from the host),
 * unless a cache for it exists; the previous keys beyond the newest few are removed. Never throws: a
 * cache is an optimisation, and the task goes on without one.
 */
export async function saveSetupCache(
  workDir: string,
  repo: string,
  key: string,
  worktree: string,
  folders: readonly string[],
): Promise<boolean> {
  const root = cacheDir(workDir, repo);
  const dir = join(root, key);
  const tmp = join(root, `.tmp-${randomBytes(4).toString("hex")}`);
  try {
    if (await stat(join(dir, COMPLETE)).catch(() => undefined)) return false;
    await mkdir(tmp, { recursive: true });
    for (const [i, folder] of folders.entries())
      if (await plainFolder(worktree, folder)) await copyTree(join(worktree, folder), join(tmp, String(i)));
    await writeFile(join(tmp, COMPLETE), new Date().toISOString());
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
    await pruneKeys(root, key);
    return true;
  } catch {
    await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    return false;
  }
}

/** A folder of the worktree may be restored: nothing there yet, and every folder on the way a real one. */
async function freePlace(worktree: string, folder: string): Promise<boolean> {
  const parts = folder.split("/").filter(Boolean);
  let at = worktree;
  for (const [i, part] of parts.entries()) {
    at = join(at, part);
    const info = await lstat(at).catch(() => undefined);
    if (i === parts.length - 1) return info === undefined;
    if (info && !info.isDirectory()) return false;
    if (!info) return true;
  }
  return false;
}

/** `folder` of the worktree is a real folder, and so is every folder on the way (no link is followed). */
async function plainFolder(worktree: string, folder: string): Promise<boolean> {
  let at = worktree;
  for (const part of folder.split("/").filter(Boolean)) {
    at = join(at, part);
    if (!(await lstat(at).catch(() => undefined))?.isDirectory()) return false;
  }
  return at !== worktree;
}

/** A copy that keeps links as links and never follows one (reflinked where the filesystem can). */
async function copyTree(source: string, target: string) {
  await execa("cp", ["-a", "--reflink=auto", "--no-target-directory", source, target]);
}

async function pruneKeys(root: string, keep: string) {
  const entries = await readdir(root).catch(() => [] as string[]);
  const dated: Array<{ name: string; at: number }> = [];
  for (const name of entries) {
    if (name === keep || name.startsWith(".")) continue;
    const info = await stat(join(root, name, COMPLETE)).catch(() => undefined);
    dated.push({ name, at: info?.mtimeMs ?? 0 });
  }
  dated.sort((a, b) => b.at - a.at);
  for (const old of dated.slice(KEYS_KEPT - 1))
    await rm(join(root, old.name), { recursive: true, force: true });
}
