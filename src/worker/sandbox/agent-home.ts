import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { chmod, copyFile, lstat, mkdir, readdir, rename, rm } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { coderFacts } from "../../core/coders.ts";
import { removeTree } from "../workspace/remove-tree.ts";

/**
 * The most carried into the next run, per file and in all (a transcript of a long task is a few MB):
 * the copy is real bytes on the worker's disk, even of a sparse file that cost the agent none.
 */
const MAX_SESSION_FILE_BYTES = 256 * 1024 * 1024;
/** How deep the old HOME is searched for the session's files. */
const MAX_DEPTH = 8;

/**
 * Starts a run of a task with a HOME Fleet controls: the task's private HOME emptied, and only the
 * session the run resumes carried over from the last run (the coder's `sessionFiles`, regular files
 * found without following a symlink, each under a size cap). Nothing else an earlier run (or its plan
 * phase) left there reaches this run: hooks and settings (`~/.claude/settings.json`), instructions
 * (`~/.claude/CLAUDE.md`), shell start-up files, plugins. Call it while no agent runs in `home`.
 * Returns the HOME-relative paths carried.
 */
export async function freshAgentHome(
  home: string,
  carry?: { coder: string; sessionId: string },
): Promise<string[]> {
  const next = `${home}.next-${randomBytes(4).toString("hex")}`;
  // The agent may open its HOME to everyone (it owns it) and leave setuid programs of the worker's
  // uid there, kept after the run: the folder holding every HOME lets no other local user through.
  await mkdir(dirname(home), { recursive: true, mode: 0o700 });
  await chmod(dirname(home), 0o700);
  await mkdir(next, { recursive: true, mode: 0o700 });
  const kept: string[] = [];
  try {
    const pattern = carry ? coderFacts(carry.coder)?.sessionFiles?.(carry.sessionId) : undefined;
    if (pattern) {
      for (const rel of await sessionFilesIn(home, pattern)) {
        await mkdir(dirname(join(next, rel)), { recursive: true, mode: 0o700 });
        // COPYFILE_EXCL: a fresh file of the worker's own (the old one was checked to be a regular file).
        await copyFile(join(home, rel), join(next, rel), constants.COPYFILE_EXCL);
        kept.push(rel);
      }
    }
    await removeTree(home);
    await rename(next, home);
  } catch (error) {
    await rm(next, { recursive: true, force: true });
    throw error;
  }
  return kept;
}

/**
 * The regular files below `home` whose HOME-relative path matches `pattern`, within the size cap in all;
 * links are never followed.
 */
async function sessionFilesIn(home: string, pattern: RegExp): Promise<string[]> {
  const found: string[] = [];
  let bytes = 0;
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) return;
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path, depth + 1);
      else if (entry.isFile() && pattern.test(relative(home, path).split(sep).join("/"))) {
        const info = await lstat(path);
        if (info.isFile() && bytes + info.size <= MAX_SESSION_FILE_BYTES) {
          bytes += info.size;
          found.push(relative(home, path));
        }
      }
    }
  };
  await walk(home, 0);
  return found;
}
