import { createHash, type Hash } from "node:crypto";
import { constants } from "node:fs";
import { lstat, open, readlink } from "node:fs/promises";
import { join } from "node:path";
import { gitIn, IGNORE_SUBMODULES, type WorktreeGitDirs } from "../workspace/git.ts";

// The runaway guard asks, before every model request, whether the agent's last turn changed the
// worktree. It is judged by content (a file rewritten with the same bytes is no progress), and kept
// cheap: only the files git lists as changed or new are looked at, a file is read again only when its
// inode, size, times or mode changed, a huge file counts by its size and the ends of its content, and
// one check reads a bounded number of bytes.

/** How much one check may read. */
export interface PrintLimits {
  /** Files up to this size are hashed whole. */
  wholeFileBytes: number;
  /** Of a larger file, this many bytes from its start and from its end are hashed, with its size. */
  endBytes: number;
  /** Bytes read by one check; files past it count by their metadata (as changed) until a later check reads them. */
  readBudgetBytes: number;
}

export const PRINT_LIMITS: PrintLimits = {
  wholeFileBytes: 4 * 1024 * 1024,
  endBytes: 512 * 1024,
  readBudgetBytes: 64 * 1024 * 1024,
};

/** The content hashes of a run's files, by path, kept while their metadata stays the same. */
export type PrintCache = Map<string, { meta: string; content: string }>;

export const newPrintCache = (): PrintCache => new Map();

/**
 * The worktree's state in one hash: what `git status` lists as changed or new, and each such file's
 * content (a symlink's target, a folder's presence, a deleted file's absence). Undefined when git cannot
 * tell. `cache` (one per run) keeps files whose metadata did not change from being read again.
 */
export async function worktreePrint(
  wt: WorktreeGitDirs,
  cache: PrintCache = newPrintCache(),
  limits: PrintLimits = PRINT_LIMITS,
): Promise<string | undefined> {
  let stdout: string;
  try {
    // The agent is running and may have filled a submodule's folder with a repository of its own:
    // git must not look into it (its config's filter drivers would run here, outside the sandbox).
    ({ stdout } = await gitIn(wt, [
      "--no-optional-locks",
      "status",
      "--porcelain=v1",
      "-z",
      "--untracked-files=all",
      IGNORE_SUBMODULES,
    ]));
  } catch {
    return undefined;
  }
  const hash = createHash("sha256").update(stdout);
  const budget = { left: limits.readBudgetBytes };
  const listed = new Set<string>();
  for (const path of changedPaths(stdout)) {
    listed.add(path);
    hash.update(`\0${path}\0${await contentOf(wt.path, path, cache, limits, budget)}`);
  }
  // A path git no longer lists is forgotten: the cache holds no more than one check's paths.
  for (const path of cache.keys()) if (!listed.has(path)) cache.delete(path);
  return hash.digest("hex");
}

/** The paths of `git status --porcelain=v1 -z` ("XY path", a rename's or copy's source as the next entry). */
export function changedPaths(porcelain: string): string[] {
  const entries = porcelain.split("\0");
  const paths: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    if (entry.length < 4) continue;
    paths.push(entry.slice(3));
    if (entry[0] === "R" || entry[0] === "C") i++;
  }
  return paths;
}

/** What a listed path holds, as a short string for the print; never throws. */
async function contentOf(
  root: string,
  path: string,
  cache: PrintCache,
  limits: PrintLimits,
  budget: { left: number },
): Promise<string> {
  const full = join(root, path);
  const st = await lstat(full, { bigint: true }).catch(() => undefined);
  if (!st) return "absent";
  const meta = `${st.dev}:${st.ino}:${st.mode}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
  const cached = cache.get(path);
  if (cached?.meta === meta) return cached.content;
  let content: string | undefined;
  if (st.isSymbolicLink())
    content = await readlink(full).then(
      (t) => `link:${t}`,
      () => undefined,
    );
  else if (st.isDirectory()) content = "dir";
  else if (!st.isFile()) content = `special:${st.mode}`;
  else content = await fileHash(full, st, limits, budget);
  if (content === undefined) return `meta:${meta}`;
  cache.set(path, { meta, content });
  return content;
}

/**
 * A regular file's content hash with its size and executable bit; undefined when it cannot be read
 * within the check's budget or is not the file that was looked at (the agent may swap it meanwhile).
 */
async function fileHash(
  full: string,
  st: { ino: bigint; size: bigint; mode: bigint; mtimeNs: bigint },
  limits: PrintLimits,
  budget: { left: number },
): Promise<string | undefined> {
  const size = Number(st.size);
  const whole = size <= limits.wholeFileBytes;
  const cost = whole ? size : 2 * limits.endBytes;
  if (cost > budget.left) return undefined;
  budget.left -= cost;
  // Never blocks on a FIFO put in its place, never follows a symlink put in its place.
  const fh = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    () => undefined,
  );
  if (!fh) return undefined;
  try {
    const now = await fh.stat({ bigint: true });
    if (!now.isFile() || now.ino !== st.ino || now.size !== st.size || now.mtimeNs !== st.mtimeNs)
      return undefined;
    const hash = createHash("sha256").update(`${size}:${(st.mode & 0o111n) !== 0n ? "x" : "-"}\0`);
    if (whole) await readInto(fh, hash, 0, size);
    else {
      await readInto(fh, hash, 0, limits.endBytes);
      await readInto(fh, hash, size - limits.endBytes, limits.endBytes);
    }
    return hash.digest("hex");
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => {});
  }
}

async function readInto(
  fh: Awaited<ReturnType<typeof open>>,
  hash: Hash,
  position: number,
  length: number,
): Promise<void> {
  const buf = Buffer.alloc(Math.min(length, 1024 * 1024));
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, length - done), position + done);
    if (bytesRead === 0) break;
    hash.update(buf.subarray(0, bytesRead));
    done += bytesRead;
  }
}
