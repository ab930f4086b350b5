import { notFound } from "./http-error.ts";
import type { Issue, Repo } from "./state.ts";

/** The pull request numbered `n` (404 for an issue or nothing). */
export function findPull(repo: Repo, n: unknown): Issue {
  const i = repo.issues.get(Number(n));
  if (!i?.pull) throw notFound();
  return i;
}

/** The branch a `head` names (`branch` or `owner:branch`); forks are not emulated, so another owner is none. */
export function headBranchOf(repo: Repo, head: string): string | undefined {
  const idx = head.indexOf(":");
  if (idx < 0) return head;
  if (head.slice(0, idx).toLowerCase() !== repo.owner.login.toLowerCase()) return undefined;
  return head.slice(idx + 1);
}

/** Recomputes a PR's head/base shas and diff figures from git. */
export async function refreshPull(repo: Repo, i: Issue): Promise<void> {
  const p = i.pull!;
  if (p.merged) return;
  const head = await repo.git.resolveRef(`refs/heads/${p.headRef}`);
  const base = await repo.git.resolveRef(`refs/heads/${p.baseRef}`);
  if (head) p.headSha = head;
  if (base) p.baseSha = base;
  if (!head || !base) {
    p.stats = { ...p.stats, mergeable: false };
    return;
  }
  const commits = (await repo.git.revList([`${base}..${head}`])).length;
  const mb = (await repo.git.mergeBase(base, head)) ?? base;
  const numstat = (await repo.git.git(["diff", "--no-renames", "--numstat", mb, head])).stdout;
  let additions = 0;
  let deletions = 0;
  let changedFiles = 0;
  for (const line of numstat.split("\n").filter(Boolean)) {
    const [a, d] = line.split("\t");
    additions += Number(a) || 0;
    deletions += Number(d) || 0;
    changedFiles += 1;
  }
  const merge = await repo.git.mergeTree(base, head);
  p.stats = { commits, additions, deletions, changedFiles, mergeable: "tree" in merge };
}
