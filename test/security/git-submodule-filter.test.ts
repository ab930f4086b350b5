import { access, appendFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { addedSince, commitAll } from "../../src/worker/4-publish.ts";
import { worktreePrint } from "../../src/worker/sandbox/worktree-print.ts";
import { gitIn } from "../../src/worker/workspace/git.ts";
import { addWorktree, type Worktree } from "../../src/worker/workspace/worktree.ts";

/**
 * A repository with a submodule: while the agent runs (or before Fleet's cleanup, should that ever
 * miss), the gitlink's folder may hold a repository the agent made, whose config names a filter
 * driver. Git looks into a submodule by running `git status` inside it with that config, so the
 * driver would run as the worker, outside the sandbox. None of Fleet's git commands may do that.
 */

const env = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
const id = ["-c", "user.name=Seed", "-c", "user.email=seed@example.invalid"];
const sh = (cwd: string, ...args: string[]) => execa("git", [...id, ...args], { cwd, env });
const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

let root: string;
let url: string;
let workDir: string;
let pwned: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-subfilter-"));
  pwned = join(root, "PWNED");
  const bare = join(root, "origin.git");
  workDir = join(root, "work");
  await execa("git", ["init", "--bare", "-q", "-b", "main", bare], { env });
  const seed = join(root, "seed");
  await execa("git", ["init", "-q", "-b", "main", seed], { env });
  await writeFile(join(seed, "r.txt"), "base\n");
  await sh(seed, "add", "-A");
  await sh(seed, "commit", "-q", "-m", "seed");
  const first = (await sh(seed, "rev-parse", "HEAD")).stdout.trim();
  // A submodule `sub`: its gitlink and .gitmodules (its contents are never fetched).
  await writeFile(join(seed, ".gitmodules"), '[submodule "sub"]\n\tpath = sub\n\turl = ../sub.git\n');
  await sh(seed, "update-index", "--add", "--cacheinfo", `160000,${first},sub`);
  await mkdir(join(seed, "sub")); // an unpopulated submodule, not a deleted one
  await sh(seed, "add", ".gitmodules");
  await sh(seed, "commit", "-q", "-m", "submodule");
  // A task branch and a base that both change r.txt: its rebase stops on a conflict.
  await sh(seed, "checkout", "-q", "-b", "fleet/1-task");
  await writeFile(join(seed, "r.txt"), "task\n");
  await sh(seed, "commit", "-q", "-am", "task");
  await sh(seed, "checkout", "-q", "main");
  await writeFile(join(seed, "r.txt"), "main\n");
  await sh(seed, "commit", "-q", "-am", "main moved");
  await sh(seed, "push", "-q", bare, "main", "fleet/1-task");
  url = `file://${bare}`;
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** What the agent does inside its sandbox: a repository of its own in `sub`, with a filter driver. */
async function plant(wt: Worktree, opts: { gitmodulesIgnoreNone?: boolean } = {}): Promise<void> {
  const sub = join(wt.path, "sub");
  await execa("git", ["init", "-q", sub], { env });
  await writeFile(join(sub, ".gitattributes"), "* filter=evil\n");
  await writeFile(join(sub, "a"), "a\n");
  await sh(sub, "add", "-A");
  await sh(sub, "commit", "-q", "-m", "a");
  await execa("git", ["config", "filter.evil.clean", `sh -c 'id > ${pwned}; cat'`], { cwd: sub, env });
  // The same size, other content: git cannot tell it changed from its size and must read it through the
  // filter (an append changed the size, and the filter then ran only when the commit and the edit fell
  // in the same second, which a loaded machine did not always give).
  await writeFile(join(sub, "a"), "b\n");
  // `ignore = none` in the .gitmodules the agent can edit outranks diff.ignoreSubmodules.
  if (opts.gitmodulesIgnoreNone) await appendFile(join(wt.path, ".gitmodules"), "\tignore = none\n");
}

describe("an agent-made repository in a submodule's folder never runs its config on the worker", () => {
  it("the plant is real: a plain `git status` of the worktree runs the agent's filter", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-task");
    await plant(wt);
    await execa("git", ["--git-dir", wt.gitDir, "--work-tree", wt.path, "status", "--porcelain"], {
      cwd: wt.path,
      env,
    });
    expect(await exists(pwned)).toBe(true);
  });

  for (const ignoreNone of [false, true]) {
    it(`worktreePrint (run while the agent runs) does not${ignoreNone ? ", also with .gitmodules ignore = none" : ""}`, async () => {
      const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-task");
      await plant(wt, { gitmodulesIgnoreNone: ignoreNone });
      const before = await worktreePrint(wt);
      expect(before).toMatch(/^[0-9a-f]{64}$/);
      expect(await exists(pwned)).toBe(false);
      // Still a print of the agent's edits.
      await writeFile(join(wt.path, "new.txt"), "x\n");
      expect(await worktreePrint(wt)).not.toBe(before);
      expect(await exists(pwned)).toBe(false);
    });
  }

  it("commitAll and the outgoing diff do not", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-task");
    await plant(wt, { gitmodulesIgnoreNone: true });
    await writeFile(join(wt.path, "r.txt"), "edited\n");
    const sha = await commitAll(wt, "edit\n");
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    const added = await addedSince(wt, wt.startSha);
    expect(added.map((f) => f.file)).toContain("r.txt");
    expect(await exists(pwned)).toBe(false);
  });

  it("a rebase's status, add and --continue (its commit's message template) do not", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-task");
    const base = (await gitIn(wt, ["rev-parse", "refs/remotes/origin/main^{commit}"])).stdout.trim();
    // As rebase-run's replayWithAgent runs them.
    const r = await gitIn(wt, ["-c", "core.editor=true", "rebase", base], { okCodes: [1] });
    expect(r.exitCode).toBe(1);
    await plant(wt, { gitmodulesIgnoreNone: true });
    await writeFile(join(wt.path, "r.txt"), "resolved\n");
    const unmerged = await gitIn(wt, ["diff", "--name-only", "--diff-filter=U", "--ignore-submodules=all"]);
    expect(unmerged.stdout).toContain("r.txt");
    await gitIn(wt, ["status", "--porcelain", "--ignore-submodules=all"]);
    await gitIn(wt, ["add", "-A"]);
    const done = await gitIn(wt, ["-c", "core.editor=true", "rebase", "--continue"], { okCodes: [1] });
    expect(done.exitCode).toBe(0);
    expect(await exists(pwned)).toBe(false);
  });
});
