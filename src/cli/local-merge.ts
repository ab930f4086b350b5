import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import { CliError } from "./errors.ts";

// `fleet merge` works in the user's own repository, as the user: their git config (identity, signing)
// applies, and their checkout is never clobbered. The base branch moves by a compare-and-swap
// (update-ref with the old value) or, when it is checked out, by `git merge --ff-only` there, which
// updates the working tree and refuses to overwrite anything: not a tracked change, not an untracked
// file, and not an ignored one either (`--no-overwrite-ignore`: a user's ignored `.env` is theirs, even
// when the branch adds a tracked `.env`). Files in the way are named before anything moves.

export type LocalMergeResult =
  | { kind: "fast-forward" | "merge-commit"; sha: string; checkout?: string }
  | { kind: "already-merged"; sha: string }
  | { kind: "conflict"; files: string[] };

async function git(cwd: string, args: string[], okCodes: number[] = [0]) {
  const r = await execa("git", args, { cwd, reject: false, stripFinalNewline: true });
  const code = r.exitCode ?? -1;
  if (!okCodes.includes(code))
    throw new CliError(`git ${args[0]} failed in ${cwd}: ${String(r.stderr || r.stdout).trim()}`);
  return { code, stdout: String(r.stdout), stderr: String(r.stderr) };
}

async function commitOf(repo: string, branch: string): Promise<string> {
  const r = await git(repo, ["rev-parse", "--verify", "-q", `refs/heads/${branch}^{commit}`], [0, 1]);
  if (r.code !== 0) throw new CliError(`${repo} has no branch "${branch}": nothing to merge.`);
  return r.stdout.trim();
}

/** The checkout (main folder or a worktree) where `branch` is checked out, if any. */
async function checkoutOf(repo: string, branch: string): Promise<string | undefined> {
  const list = (await git(repo, ["worktree", "list", "--porcelain"])).stdout;
  for (const entry of list.split("\n\n")) {
    const path = /^worktree (.+)$/m.exec(entry)?.[1];
    if (path && entry.split("\n").includes(`branch refs/heads/${branch}`)) return path;
  }
  return undefined;
}

/**
 * Merges `branch` into `base` in the repository at `repo`: a fast-forward when `base` has not moved,
 * else a merge commit (`message`). A conflict merges nothing and names the files. A checked-out `base`
 * with uncommitted changes is refused before anything moves.
 */
export async function mergeLocalBranch(
  repo: string,
  branch: string,
  base: string,
  message: string,
): Promise<LocalMergeResult> {
  const head = await commitOf(repo, branch);
  const baseSha = await commitOf(repo, base);
  if ((await git(repo, ["merge-base", "--is-ancestor", head, baseSha], [0, 1])).code === 0)
    return { kind: "already-merged", sha: baseSha };
  const checkout = await checkoutOf(repo, base);
  if (checkout) {
    const dirty = (await git(checkout, ["status", "--porcelain", "--untracked-files=no"])).stdout.trim();
    if (dirty)
      throw new CliError(
        `${base} is checked out in ${checkout} with uncommitted changes:\n${dirty}\nCommit or stash them (or switch that checkout to another branch), then run fleet merge again. Nothing was merged.`,
      );
  }
  const ff = (await git(repo, ["merge-base", "--is-ancestor", baseSha, head], [0, 1])).code === 0;
  let target = head;
  if (!ff) {
    const tree = await git(
      repo,
      ["merge-tree", "--write-tree", "--name-only", "--no-messages", baseSha, head],
      [0, 1],
    );
    const [treeId, ...files] = tree.stdout.split("\n").filter(Boolean);
    if (tree.code === 1) return { kind: "conflict", files };
    target = (
      await git(repo, ["commit-tree", treeId!, "-p", baseSha, "-p", head, "-m", message])
    ).stdout.trim();
  }
  if (checkout) {
    const inTheWay = await untrackedInTheWay(checkout, baseSha, target);
    if (inTheWay.length)
      throw new CliError(
        `${base} is checked out in ${checkout}, and merging ${branch} would overwrite files there that git does not track:\n${inTheWay.map((f) => `  ${f.path} (${f.ignored ? "ignored" : "untracked"})`).join("\n")}\nMove them out of ${checkout} (or delete them if you do not need them), then run fleet merge again. Nothing was merged.`,
      );
    // Updates the working tree with the branch; refuses (and moves nothing) if a file would be lost,
    // ignored files included.
    const r = await git(checkout, ["merge", "--ff-only", "--no-overwrite-ignore", "-q", target], [0, 1, 128]);
    if (r.code !== 0)
      throw new CliError(
        `git merge --ff-only in ${checkout} refused to update ${base}: ${(r.stderr || r.stdout).trim() || "see git status there"}. Nothing was merged.`,
      );
  } else {
    // Only if the base is still where it was read: a commit made meanwhile is never lost.
    const r = await git(
      repo,
      ["update-ref", "-m", message, `refs/heads/${base}`, target, baseSha],
      [0, 1, 128],
    );
    if (r.code !== 0)
      throw new CliError(`${base} moved while fleet merge ran; nothing was merged. Run it again.`);
  }
  return { kind: ff ? "fast-forward" : "merge-commit", sha: target, ...(checkout ? { checkout } : {}) };
}

/**
 * The untracked and ignored files of `checkout` (whose HEAD is `from`) that moving it to `to` would
 * overwrite: a file at a path the merge writes, a file where it needs a folder, or a folder where it
 * writes a file.
 */
async function untrackedInTheWay(
  checkout: string,
  from: string,
  to: string,
): Promise<Array<{ path: string; ignored: boolean }>> {
  const changed = (await git(checkout, ["diff", "--name-only", "--no-renames", "-z", from, to])).stdout
    .split("\0")
    .filter(Boolean);
  if (changed.length === 0) return [];
  // Untracked folders come collapsed ("dir/"), ignored ones too: the listing stays small.
  const status = await git(checkout, [
    "status",
    "--porcelain=v1",
    "-z",
    "--untracked-files=normal",
    "--ignored=traditional",
  ]);
  const untracked = new Map<string, boolean>();
  for (const entry of status.stdout.split("\0")) {
    if (entry.startsWith("?? ")) untracked.set(entry.slice(3), false);
    else if (entry.startsWith("!! ")) untracked.set(entry.slice(3), true);
  }
  if (untracked.size === 0) return [];
  const exists = (path: string) =>
    lstat(join(checkout, path)).then(
      () => true,
      () => false,
    );
  const found: Array<{ path: string; ignored: boolean }> = [];
  for (const path of changed) {
    const parts = path.split("/");
    let hit: { path: string; ignored: boolean } | undefined;
    for (let i = 1; i <= parts.length && !hit; i++) {
      const prefix = parts.slice(0, i).join("/");
      const asFile = untracked.get(prefix);
      if (asFile !== undefined) hit = { path: prefix, ignored: asFile };
      const asDir = untracked.get(`${prefix}/`);
      if (asDir !== undefined && (i === parts.length || (await exists(path))))
        hit = { path: i === parts.length ? `${prefix}/` : path, ignored: asDir };
    }
    if (hit && !found.some((f) => f.path === hit.path)) found.push(hit);
  }
  return found;
}

/** The files `branch` would conflict in if merged into `base` now: [] when it merges cleanly. */
export async function conflictingFiles(repo: string, base: string, branch: string): Promise<string[]> {
  const r = await git(
    repo,
    [
      "merge-tree",
      "--write-tree",
      "--name-only",
      "--no-messages",
      `refs/heads/${base}`,
      `refs/heads/${branch}`,
    ],
    [0, 1],
  );
  return r.code === 1 ? r.stdout.split("\n").filter(Boolean).slice(1) : [];
}

/**
 * The branch a task created now in `repo` is to merge into, recorded on its issue at `fleet bd create`:
 * the branch checked out (the worker starts task branches from it), unless that is a task's own
 * `fleet/*` branch or HEAD is detached; then `origin`'s default branch if it exists here. Undefined
 * when neither tells: `fleet merge` then asks for --base.
 */
export async function baseBranchAt(repo: string): Promise<string | undefined> {
  const head = await git(repo, ["symbolic-ref", "-q", "--short", "HEAD"], [0, 1, 128]);
  const current = head.code === 0 ? head.stdout.trim() : "";
  if (current && !current.startsWith("fleet/")) return current;
  const origin = await git(repo, ["symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"], [0, 1, 128]);
  const name = origin.code === 0 ? origin.stdout.trim().replace(/^origin\//, "") : "";
  if (!name || name.startsWith("fleet/")) return undefined;
  const local = await git(repo, ["rev-parse", "--verify", "-q", `refs/heads/${name}`], [0, 1]);
  return local.code === 0 ? name : undefined;
}
