import { access, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  assertFleetBranch,
  commitAll,
  commitMessage,
  hasNewCommits,
  pushBranch,
} from "../../src/worker/4-publish.ts";
import { gitAuthEnv } from "../../src/worker/workspace/git.ts";
import {
  addWorktree,
  cleanAfterAgent,
  removeWorktree,
  worktreePath,
} from "../../src/worker/workspace/worktree.ts";

const env = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
const id = ["-c", "user.name=Seed", "-c", "user.email=seed@example.invalid"];
const gitIn = (cwd: string, ...args: string[]) => execa("git", [...id, ...args], { cwd, env });
const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

let root: string;
let bare: string;
let url: string;
let workDir: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-wt-"));
  bare = join(root, "origin.git");
  workDir = join(root, "work");
  await execa("git", ["init", "--bare", "-q", "-b", "main", bare], { env });
  const seed = join(root, "seed");
  await execa("git", ["init", "-q", "-b", "main", seed], { env });
  await writeFile(join(seed, "README.md"), "# widgets\n");
  await gitIn(seed, "add", "-A");
  await gitIn(seed, "commit", "-q", "-m", "seed");
  await gitIn(seed, "push", "-q", bare, "main");
  url = `file://${bare}`;
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A commit more on the origin's main (NEW.md). */
async function moveMainOn(): Promise<void> {
  const seed = join(root, "seed");
  await writeFile(join(seed, "NEW.md"), "new\n");
  await gitIn(seed, "add", "-A");
  await gitIn(seed, "commit", "-q", "-m", "more");
  await gitIn(seed, "push", "-q", bare, "main");
}

/**
 * Runs `fn` with a git on PATH (Fleet finds its git there) that runs the shell `script` first, then the
 * real git unless the script exits: a test sees, or fails, Fleet's git commands. `rewrite` changes it.
 */
async function withGitShim(
  script: string,
  fn: (shim: { real: string; rewrite: (script: string) => Promise<void> }) => Promise<void>,
): Promise<void> {
  const real = (await execa("sh", ["-c", "command -v git"])).stdout.trim();
  const shims = join(root, "shims");
  await mkdir(shims, { recursive: true });
  const rewrite = (text: string) =>
    writeFile(join(shims, "git"), `#!/bin/sh\n${text}\nexec ${real} "$@"\n`, { mode: 0o755 });
  await rewrite(script);
  const path = process.env.PATH;
  process.env.PATH = `${shims}:${path}`;
  try {
    await fn({ real, rewrite });
  } finally {
    process.env.PATH = path;
  }
}

describe("worktree and publish, against a real bare repository", () => {
  it("adds a worktree on a fleet branch, commits as Fleet with a co-author, pushes, removes", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-hello");
    expect(wt.baseBranch).toBe("main");
    expect(wt.continued).toBe(false);
    await writeFile(join(wt.path, "HELLO.md"), "hi\n");
    const msg = commitMessage({
      summary: "Add HELLO.md",
      title: "Hello",
      issue: 1,
      taskId: "t1",
      coder: "claude",
    });
    const sha = await commitAll(wt, msg);
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    expect(await hasNewCommits(wt, wt.startSha)).toBe(true);
    await pushBranch(wt, url, "fleet/1-hello");
    const log = await execa(
      "git",
      ["--git-dir", bare, "log", "-1", "--format=%an <%ae>%n%B", "fleet/1-hello"],
      { env },
    );
    expect(log.stdout).toContain("Fleet <fleet@users.noreply.github.com>");
    expect(log.stdout).toContain("Add HELLO.md");
    expect(log.stdout).toContain("Co-authored-by: Claude <noreply@anthropic.com>");
    const config = await execa("git", ["--git-dir", wt.cacheDir, "config", "--list", "--local"], { env });
    expect(config.stdout).not.toContain(url);
    await removeWorktree(wt);
    expect(await exists(wt.path)).toBe(false);
    expect(await exists(join(wt.path, ".."))).toBe(false);
  });

  it("commits nothing when nothing changed", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t2", "fleet/2-x");
    expect(await commitAll(wt, "nothing\n")).toBeUndefined();
    expect(await hasNewCommits(wt, wt.startSha)).toBe(false);
    await removeWorktree(wt);
  });

  it("recovers from a crashed run's worktree of the same branch and continues a pushed branch", async () => {
    const first = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t3", "fleet/3-y");
    await writeFile(join(first.path, "A.md"), "a\n");
    await commitAll(first, "a\n");
    await pushBranch(first, url, "fleet/3-y");
    // Crash: the worktree stays registered and on disk; a different task id then claims the branch.
    const again = await addWorktree(
      workDir,
      { repo: "octo/widgets", cloneUrl: url },
      "t3-retry",
      "fleet/3-y",
    );
    expect(again.continued).toBe(true);
    expect(await exists(join(again.path, "A.md"))).toBe(true);
    expect(await exists(first.path)).toBe(false);
    // A stray directory at the worktree path is cleared too.
    await removeWorktree(again);
    await mkdir(worktreePath(workDir, "t3-retry"), { recursive: true });
    await writeFile(join(worktreePath(workDir, "t3-retry"), "junk"), "x");
    const third = await addWorktree(
      workDir,
      { repo: "octo/widgets", cloneUrl: url },
      "t3-retry",
      "fleet/3-y",
    );
    expect(await exists(join(third.path, "junk"))).toBe(false);
    await removeWorktree(third);
  });

  it("reuses a finished task's checkout for the next task, clean and on the new branch, keeping nothing of the old task", async () => {
    const src = { repo: "octo/widgets", cloneUrl: url };
    const first = await addWorktree(workDir, src, "t5", "fleet/5-first");
    await writeFile(join(first.path, "README.md"), "# changed, never committed\n");
    await writeFile(join(first.path, "stray.txt"), "untracked\n");
    await mkdir(join(first.path, "node_modules"), { recursive: true });
    await writeFile(join(first.path, "node_modules", "x.js"), "ignored or not, it goes\n");
    // The checkout's folder (a rename keeps its inode; its `.git` link is written anew on removal).
    const inode = (await execa("stat", ["-c", "%i", first.path])).stdout;
    await removeWorktree(first);
    expect(await exists(first.path)).toBe(false);
    expect(await exists(join(first.path, ".."))).toBe(false);

    // The main branch moves on meanwhile.
    await moveMainOn();

    const second = await addWorktree(workDir, src, "t6", "fleet/6-second");
    // The same checkout (its folder and its admin folder moved with it), now at the new main on the new branch.
    expect((await execa("stat", ["-c", "%i", second.path])).stdout).toBe(inode);
    expect(second.gitDir).toBe(first.gitDir);
    expect((await execa("git", ["branch", "--show-current"], { cwd: second.path, env })).stdout).toBe(
      "fleet/6-second",
    );
    expect(
      (await execa("git", ["status", "--porcelain", "--ignored"], { cwd: second.path, env })).stdout,
    ).toBe("");
    expect(await exists(join(second.path, "NEW.md"))).toBe(true);
    expect(await exists(join(second.path, "stray.txt"))).toBe(false);
    expect(await exists(join(second.path, "node_modules"))).toBe(false);
    const main = (await execa("git", ["--git-dir", bare, "rev-parse", "main"], { env })).stdout;
    expect(second.startSha).toBe(main);
    // The first task's branch is free again (no spare holds it): it can be checked out anew.
    const again = await addWorktree(workDir, src, "t5b", "fleet/5-first");
    expect(again.branch).toBe("fleet/5-first");
    await removeWorktree(second);
    await removeWorktree(again);
  });

  it("empties a submodule's folder before a finished task's checkout is reused: what its agent wrote there never reaches the next task", async () => {
    // `git clean` and a forced checkout never look inside a gitlink's folder.
    const seed = join(root, "seed");
    const head = (await gitIn(seed, "rev-parse", "HEAD")).stdout;
    await gitIn(seed, "update-index", "--add", "--cacheinfo", `160000,${head},vendor/lib`);
    await gitIn(seed, "commit", "-q", "-m", "a submodule");
    await gitIn(seed, "push", "-q", bare, "main");
    const src = { repo: "octo/widgets", cloneUrl: url };
    const first = await addWorktree(workDir, src, "t1", "fleet/1-sub");
    await mkdir(join(first.path, "vendor/lib/deep"), { recursive: true });
    await writeFile(join(first.path, "vendor/lib/deep/planted.sh"), "echo from the first task's agent\n");
    await removeWorktree(first);
    const next = await addWorktree(workDir, src, "t2", "fleet/2-sub");
    // The spare was taken (the same checkout, moved), and the submodule's folder is there, empty.
    expect(next.gitDir).toBe(first.gitDir);
    expect(await exists(join(next.path, "vendor/lib/deep"))).toBe(false);
    expect(await exists(join(next.path, "vendor/lib"))).toBe(true);
    await removeWorktree(next);
  });

  it("runs no git of Fleet's in a checkout whose admin folder no longer names it", async () => {
    const src = { repo: "octo/widgets", cloneUrl: url };
    const wt = await addWorktree(workDir, src, "t1", "fleet/1-gone");
    await writeFile(join(wt.gitDir, "gitdir"), `${join(root, "elsewhere", ".git")}\n`);
    await expect(cleanAfterAgent(wt)).rejects.toThrow(/no longer registered in its cache clone/);
    // Its end removes the folder and leaves the other checkout's registration alone.
    await removeWorktree(wt);
    expect(await exists(wt.path)).toBe(false);
    expect(await exists(join(wt.gitDir, "HEAD"))).toBe(true);
  });

  it("works through a symlinked work folder, and keeps no spare of a checkout with a rebase under way", async () => {
    await mkdir(join(root, "real-work"));
    await symlink(join(root, "real-work"), join(root, "linked-work"));
    const src = { repo: "octo/widgets", cloneUrl: url };
    const wt = await addWorktree(join(root, "linked-work"), src, "t1", "fleet/1-linked");
    expect(wt.path.startsWith(join(root, "real-work"))).toBe(true);
    await writeFile(join(wt.path, "A.md"), "a\n");
    expect(await commitAll(wt, "a\n")).toMatch(/^[0-9a-f]{40}$/);
    // A rebase stopped and not aborted: its state is the task's, not the next one's.
    await mkdir(join(wt.gitDir, "rebase-merge"));
    await removeWorktree(wt);
    expect(await exists(wt.path)).toBe(false);
    expect(
      await readdir(join(root, "real-work", "repos", "octo", "widgets.spares2")).catch(() => []),
    ).toEqual([]);
  });

  it("tries a failed fetch once more: tasks that shared it do not all fail with a moment's failure; a refusal is not retried", async () => {
    // A git on PATH whose first fetch fails (a marker file says it did), then runs the real one.
    const failed = join(root, "failed-once");
    const log = join(root, "fetches.log");
    const transient = `case " $* " in *" fetch "*) echo fetch >> ${log}; if [ ! -e ${failed} ]; then : > ${failed}; echo "fatal: unable to access: Connection reset" >&2; exit 128; fi;; esac`;
    await withGitShim(transient, async (shim) => {
      const src = { repo: "octo/widgets", cloneUrl: url };
      const together = await Promise.all(
        [1, 2, 3].map((n) => addWorktree(workDir, src, `t${n}`, `fleet/${n}-retry`)),
      );
      expect(together).toHaveLength(3);
      expect((await readFile(log, "utf8")).trim().split("\n")).toEqual(["fetch", "fetch"]);
      for (const w of together) await removeWorktree(w);

      // A refusal is not asked again: credentials that fail now fail a second later too.
      await shim.rewrite(
        `case " $* " in *" fetch "*) echo refused >> ${log}; echo "fatal: Authentication failed for 'https://example.invalid/'" >&2; exit 128;; esac`,
      );
      await rm(log);
      await expect(addWorktree(workDir, src, "t4", "fleet/4-refused")).rejects.toThrow(
        /Authentication failed/,
      );
      expect((await readFile(log, "utf8")).trim().split("\n")).toEqual(["refused"]);
    });
  });

  it("shares one fetch of the cache clone between tasks starting together, and fetches again for a task asking later", async () => {
    // A git that notes its fetches, then runs the real one.
    const log = join(root, "git.log");
    await withGitShim(`case " $* " in *" fetch "*|*" ls-remote "*) echo "$*" >> ${log};; esac`, async () => {
      const src = { repo: "octo/widgets", cloneUrl: url };
      const together = await Promise.all(
        [1, 2, 3, 4].map((n) => addWorktree(workDir, src, `t${n}`, `fleet/${n}-together`)),
      );
      const main = (await execa("git", ["--git-dir", bare, "rev-parse", "main"], { env })).stdout;
      expect(together.map((w) => w.startSha)).toEqual([main, main, main, main]);
      const lines = async () => (await readFile(log, "utf8")).trim().split("\n");
      expect((await lines()).filter((l) => l.includes(" fetch "))).toHaveLength(1);
      expect((await lines()).filter((l) => l.includes("ls-remote"))).toHaveLength(1);

      // main moves on; a task asking now fetches anew and starts from it.
      await moveMainOn();
      const later = await addWorktree(workDir, src, "t5", "fleet/5-later");
      expect(later.startSha).toBe(
        (await execa("git", ["--git-dir", bare, "rev-parse", "main"], { env })).stdout,
      );
      expect((await lines()).filter((l) => l.includes(" fetch "))).toHaveLength(2);
      for (const w of [...together, later]) await removeWorktree(w);
    });
  });

  it("starts a task with one git command on the cache clone besides its fetch and checkout, and drops only a gone checkout's registration", async () => {
    // Tasks starting together wait on the cache clone's lock: what runs under it is each start's cost
    // to the next. Every git command of Fleet's is noted by a git on PATH that then runs the real one.
    const log = join(root, "git.log");
    /** The subcommands run since the last call (a worktree's with its verb), options and paths left out. */
    const since = async () => {
      const lines = (await readFile(log, "utf8").catch(() => "")).trim().split("\n").filter(Boolean);
      await rm(log, { force: true });
      return lines.map((line) => {
        const words = line.split(" ");
        let i = 0;
        while (["-c", "--git-dir", "--work-tree"].includes(words[i]!) || words[i] === "--no-optional-locks")
          i += words[i] === "--no-optional-locks" ? 1 : 2;
        return words[i] === "worktree" ? `worktree ${words[i + 1]}` : words[i]!;
      });
    };
    await withGitShim(`echo "$*" >> ${log}`, async ({ real }) => {
      const src = { repo: "octo/widgets", cloneUrl: url };
      const main = (await execa(real, ["--git-dir", bare, "rev-parse", "main"], { env })).stdout;
      const first = await addWorktree(workDir, src, "t1", "fleet/1-a");
      await removeWorktree(first);
      await since();
      // A spare checkout is taken: moved under the lock, switched outside it (it was cleaned at its task's end).
      const second = await addWorktree(workDir, src, "t2", "fleet/2-b");
      expect(await since()).toEqual([
        "fetch",
        "update-ref",
        "ls-remote",
        "for-each-ref",
        "worktree move",
        "checkout",
      ]);
      expect(second.startSha).toBe(main);
      // No spare left: a checkout of its own.
      const third = await addWorktree(workDir, src, "t3", "fleet/3-c");
      expect(await since()).toEqual(["fetch", "update-ref", "ls-remote", "for-each-ref", "worktree add"]);
      expect(third.startSha).toBe(main);

      // A running agent deleted its own `.git` link, and a crashed run's checkout is gone from the disk:
      // the next start drops the crashed run's registration alone, never the running task's (whose admin
      // folder's name the next checkout would take: the running task's commit would land on its branch).
      await rm(join(third.path, ".git"));
      await writeFile(join(third.path, "THIRD.md"), "the third task's work\n");
      const fourth = await addWorktree(workDir, src, "t4", "fleet/4-d");
      await rm(join(fourth.path, ".."), { recursive: true, force: true });
      await since();
      const fifth = await addWorktree(workDir, src, "t5", "fleet/5-e");
      expect(await since()).toEqual(["fetch", "update-ref", "ls-remote", "for-each-ref", "worktree add"]);
      expect(fifth.gitDir).not.toBe(third.gitDir);
      const listed = await execa(real, ["worktree", "list", "--porcelain"], { cwd: fifth.cacheDir, env });
      expect(listed.stdout).not.toContain(fourth.path);
      expect(listed.stdout).toContain(third.path);
      await cleanAfterAgent(third);
      expect(await commitAll(third, "third\n")).toMatch(/^[0-9a-f]{40}$/);
      const show = (ref: string) =>
        execa(real, ["show", "--name-only", "--format=%s", ref], { cwd: fifth.cacheDir, env });
      expect((await show("refs/heads/fleet/3-c")).stdout).toContain("THIRD.md");
      expect((await show("refs/heads/fleet/5-e")).stdout).not.toContain("THIRD.md");
      for (const w of [second, third, fifth]) await removeWorktree(w);
    });
  });

  it("keeps a running task's worktree when another task prunes the cache clone while its link is restored", async () => {
    // The worker restores a task's `.git` link after its agent (cleanAfterAgent) outside the cache
    // clone's lock, while other tasks start and end, each running `git worktree prune`. A link removed
    // and written again left a moment in which prune dropped the task's admin folder (seen at 50 tasks
    // at once: "not a git repository: .../worktrees/repo34").
    const src = { repo: "octo/widgets", cloneUrl: url };
    const wt = await addWorktree(workDir, src, "t1", "fleet/1-hello");
    let pruning = true;
    const prunes = (async () => {
      let n = 0;
      while (pruning || n < 50) {
        await execa("git", ["worktree", "prune"], { cwd: wt.cacheDir, env });
        n += 1;
      }
      return n;
    })();
    for (let i = 0; i < 300; i++) await cleanAfterAgent(wt);
    pruning = false;
    expect(await prunes).toBeGreaterThanOrEqual(50);
    expect(await exists(join(wt.gitDir, "HEAD"))).toBe(true);
    const head = await execa("git", ["rev-parse", "--abbrev-ref", "HEAD"], { cwd: wt.path, env });
    expect(head.stdout).toBe("fleet/1-hello");
  });

  it("counts a pushed branch with nothing on it (draft_pr's empty start) as pushed, not continued", async () => {
    const src = { repo: "octo/widgets", cloneUrl: url };
    const first = await addWorktree(workDir, src, "t8", "fleet/8-draft");
    await execa(
      "git",
      [
        ...id,
        "--git-dir",
        first.gitDir,
        "--work-tree",
        first.path,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "start",
      ],
      { env },
    );
    await pushBranch(first, url, "fleet/8-draft");
    await removeWorktree(first);
    const again = await addWorktree(workDir, src, "t8b", "fleet/8-draft");
    expect([again.pushed, again.continued]).toEqual([true, false]);
    // A change on it: an earlier run's work, which setup treats as the agent's.
    await writeFile(join(again.path, "WORK.md"), "work\n");
    await commitAll(again, "work");
    await pushBranch(again, url, "fleet/8-draft");
    await removeWorktree(again);
    const third = await addWorktree(workDir, src, "t8c", "fleet/8-draft");
    expect([third.pushed, third.continued]).toEqual([true, true]);
    await removeWorktree(third);
  });

  it("refuses to push anything but a fleet/* branch", async () => {
    for (const b of ["main", "fleet/../main", "feature/x", "fleet/", "refs/heads/main"]) {
      expect(() => assertFleetBranch(b)).toThrow(/only to fleet\/\*/);
    }
    await expect(pushBranch({ path: root, gitDir: join(root, ".git") }, url, "main")).rejects.toThrow(
      /refusing to push "main"/,
    );
  });

  it("puts git credentials in the environment only", () => {
    const e = gitAuthEnv({ username: "x-access-token", token: "ghs_secret" });
    expect(e.GIT_CONFIG_KEY_0).toBe("http.extraHeader");
    expect(Buffer.from(e.GIT_CONFIG_VALUE_0!.split(" ").at(-1)!, "base64").toString()).toBe(
      "x-access-token:ghs_secret",
    );
  });
});
