// The worktree's print, which the runaway guard compares before every model request: it follows the
// content of what git lists as changed or new, not when it was written, and one check reads a bounded
// number of bytes.
import { execFileSync } from "node:child_process";
import { chmod, mkdtemp, rename, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  changedPaths,
  newPrintCache,
  type PrintLimits,
  worktreePrint,
} from "../../src/worker/sandbox/worktree-print.ts";
import type { WorktreeGitDirs } from "../../src/worker/workspace/git.ts";

let dir: string;
let wt: WorktreeGitDirs;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleet-print-"));
  const git = (...args: string[]) => execFileSync("git", args, { cwd: dir, stdio: "pipe" });
  git("init", "-q", "-b", "main");
  await writeFile(join(dir, "README.md"), "# readme\n");
  git("add", "README.md");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first");
  wt = { path: dir, gitDir: join(dir, ".git") };
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** Moves a file's modification time on, as a rewrite a second later would. */
const touchLater = (path: string, seconds: number) =>
  utimes(path, new Date(Date.UTC(2030, 0, 1, 0, 0, seconds)), new Date(Date.UTC(2030, 0, 1, 0, 0, seconds)));

describe("worktreePrint", () => {
  it("is the same after a file is rewritten with the same content, and differs when its content does", async () => {
    const cache = newPrintCache();
    const hello = join(dir, "HELLO.md");
    await writeFile(hello, "hello\n");
    const first = await worktreePrint(wt, cache);
    await writeFile(hello, "hello\n");
    await touchLater(hello, 1);
    expect(await worktreePrint(wt, cache)).toBe(first);
    // Without a cache too: the print is of content, not of metadata.
    await touchLater(hello, 2);
    expect(await worktreePrint(wt)).toBe(first);
    await writeFile(hello, "hullo\n");
    expect(await worktreePrint(wt, cache)).not.toBe(first);
  });

  it("sees a tracked file edited back to what it was, a new executable bit and a deleted file", async () => {
    const readme = join(dir, "README.md");
    const clean = await worktreePrint(wt);
    await writeFile(readme, "# changed\n");
    const edited = await worktreePrint(wt);
    expect(edited).not.toBe(clean);
    await writeFile(readme, "# readme\n");
    expect(await worktreePrint(wt)).toBe(clean);
    await chmod(readme, 0o755);
    expect(await worktreePrint(wt)).not.toBe(clean);
    await rm(readme);
    expect(await worktreePrint(wt)).not.toBe(clean);
  });

  it("reads at most its budget in one check; a file past it counts as changed until a later check reads it", async () => {
    const limits: PrintLimits = { wholeFileBytes: 1024, endBytes: 16, readBudgetBytes: 10 };
    const cache = newPrintCache();
    await writeFile(join(dir, "a.txt"), "aaaaaaa\n");
    await writeFile(join(dir, "b.txt"), "bbbbbbb\n");
    // 8 bytes each, 10 to read: the first check reads one, the second the other (the first is cached).
    const first = await worktreePrint(wt, cache, limits);
    const second = await worktreePrint(wt, cache, limits);
    expect(second).not.toBe(first);
    expect(cache.size).toBe(2);
    // Both are cached now: nothing is read, and the print stays.
    expect(await worktreePrint(wt, cache, { ...limits, readBudgetBytes: 0 })).toBe(second);
  });

  it("judges a huge file by its size and the ends of its content", async () => {
    const limits: PrintLimits = { wholeFileBytes: 64, endBytes: 8, readBudgetBytes: 1024 };
    const big = join(dir, "big.bin");
    const body = (middle: string, end = "END-----") => `START---${middle.repeat(100)}${end}`;
    await writeFile(big, body("x"));
    const before = await worktreePrint(wt, newPrintCache(), limits);
    await writeFile(big, body("y"));
    expect(await worktreePrint(wt, newPrintCache(), limits)).toBe(before);
    await writeFile(big, body("x", "END-----!"));
    expect(await worktreePrint(wt, newPrintCache(), limits)).not.toBe(before);
  });

  it("does not block on a FIFO put in place of a tracked file, and sees it", async () => {
    const clean = await worktreePrint(wt);
    await rm(join(dir, "README.md"));
    const deleted = await worktreePrint(wt);
    execFileSync("mkfifo", [join(dir, "README.md")]);
    const fifo = await worktreePrint(wt);
    expect(fifo).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set([clean, deleted, fifo]).size).toBe(3);
  });

  it("reads a staged rename's two paths from git's porcelain output", async () => {
    execFileSync("git", ["mv", "README.md", "READ.md"], { cwd: dir });
    const { stdout } = {
      stdout: execFileSync("git", ["status", "--porcelain=v1", "-z"], { cwd: dir }).toString(),
    };
    expect(changedPaths(stdout)).toEqual(["READ.md"]);
    await writeFile(join(dir, "new file.txt"), "x\n");
    await rename(join(dir, "new file.txt"), join(dir, "new name.txt"));
    const after = execFileSync("git", ["status", "--porcelain=v1", "-z", "--untracked-files=all"], {
      cwd: dir,
    }).toString();
    expect(changedPaths(after).sort()).toEqual(["READ.md", "new name.txt"]);
  });
});
