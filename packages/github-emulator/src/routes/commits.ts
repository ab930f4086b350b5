import { notFound } from "../http-error.ts";
import type { Ctx, Reply, Router } from "../router.ts";
import type { Repo } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Commits: history, one commit, a comparison, computed from git (https://docs.github.com/en/rest/commits/commits). */
export function registerCommitRoutes(r: Router, w: World): void {
  // The history of a branch or commit, newest first (what `git log` shows), paged like GitHub.
  r.on("GET /repos/{owner}/{repo}/commits", async (ctx) => {
    const repo = w.repo(ctx);
    const head = await repo.git.resolveCommitish(String(ctx.params.sha ?? repo.defaultBranch));
    if (!head) throw notFound();
    const page = paginate(ctx, w.shapes.api, await repo.git.revList([head]));
    const body = await Promise.all(page.body.map((sha) => commitJson(w, repo, sha)));
    return { ...page, body };
  });

  r.on("GET /repos/{owner}/{repo}/commits/{ref}", async (ctx) => {
    const repo = w.repo(ctx);
    const sha = await repo.git.resolveCommitish(String(ctx.params.ref));
    if (!sha) throw notFound();
    const c = await repo.git.readCommit(sha);
    if (!c) return { status: 200, body: undefined };
    const files = c.parents[0] ? await repo.git.changedFiles(c.parents[0], sha) : [];
    return {
      status: 200,
      body: {
        ...w.shapes.commit(repo, c),
        files: files.map((f) => w.shapes.diffFile(sha, f)),
        stats: { total: 0, additions: 0, deletions: 0 },
      },
    };
  });

  r.on("GET /repos/{owner}/{repo}/compare/{basehead}", (ctx) => compare(w, ctx));
}

/** A commit as the REST API lists it, read from git; undefined when there is no such commit. */
export async function commitJson(w: World, repo: Repo, sha: string) {
  const c = await repo.git.readCommit(sha);
  return c ? w.shapes.commit(repo, c) : undefined;
}

async function compare(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx);
  const [baseRef, headRef] = String(ctx.params.basehead).split("...");
  const base = baseRef ? await repo.git.resolveCommitish(baseRef) : undefined;
  const head = headRef ? await repo.git.resolveCommitish(headRef) : undefined;
  if (!base || !head) throw notFound();
  const mb = (await repo.git.mergeBase(base, head)) ?? base;
  const ahead = await repo.git.revList(["--reverse", `${base}..${head}`]);
  const behind = await repo.git.revList([`${head}..${base}`]);
  const status =
    ahead.length && behind.length
      ? "diverged"
      : ahead.length
        ? "ahead"
        : behind.length
          ? "behind"
          : "identical";
  const commits = [];
  for (const sha of ahead.slice(0, 250)) commits.push(await commitJson(w, repo, sha));
  const files = await repo.git.changedFiles(mb, head);
  const html = `${w.shapes.html}/${repo.fullName}/compare`;
  return {
    status: 200,
    body: {
      url: `${w.shapes.api}/repos/${repo.fullName}/compare/${ctx.params.basehead}`,
      html_url: `${html}/${ctx.params.basehead}`,
      permalink_url: `${html}/${base}...${head}`,
      diff_url: `${html}/${ctx.params.basehead}.diff`,
      patch_url: `${html}/${ctx.params.basehead}.patch`,
      base_commit: await commitJson(w, repo, base),
      merge_base_commit: await commitJson(w, repo, mb),
      status,
      ahead_by: ahead.length,
      behind_by: behind.length,
      total_commits: ahead.length,
      commits,
      files: files.map((f) => w.shapes.diffFile(head, f)),
    },
  };
}
