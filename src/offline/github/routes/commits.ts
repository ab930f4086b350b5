import { notFound } from "../http-error.ts";
import type { Router } from "../router.ts";
import type { Repo } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Commit views (`repos.getCommit`, `repos.compareCommits`) computed from git. */
export function registerCommitRoutes(r: Router, w: World): void {
  const commitJson = async (repo: Repo, sha: string, withFiles: boolean) => {
    const c = await repo.git.readCommit(sha);
    if (!c) return undefined;
    const api = `${w.shapes.api}/repos/${repo.fullName}`;
    const out: Record<string, unknown> = {
      sha,
      node_id: w.shapes.nodeId("Commit", Number.parseInt(sha.slice(0, 8), 16)),
      commit: {
        author: c.author,
        committer: c.committer,
        message: c.message,
        tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
        url: `${api}/git/commits/${sha}`,
        comment_count: 0,
        verification: {
          verified: false,
          reason: "unsigned",
          signature: null,
          payload: null,
          verified_at: null,
        },
      },
      url: `${api}/commits/${sha}`,
      html_url: `${w.shapes.html}/${repo.fullName}/commit/${sha}`,
      comments_url: `${api}/commits/${sha}/comments`,
      author: null,
      committer: null,
      parents: c.parents.map((p) => ({
        sha: p,
        url: `${api}/commits/${p}`,
        html_url: `${w.shapes.html}/${repo.fullName}/commit/${p}`,
      })),
    };
    if (withFiles) {
      const files = c.parents[0] ? await repo.git.changedFiles(c.parents[0], sha) : [];
      out.files = files.map((f) => ({
        sha,
        filename: f.path,
        status: fileStatus(f.status),
        additions: 0,
        deletions: 0,
        changes: 0,
        blob_url: "",
        raw_url: "",
        contents_url: "",
      }));
      out.stats = { total: 0, additions: 0, deletions: 0 };
    }
    return out;
  };

  // The history of a branch or commit, newest first (what `git log` shows), paged like GitHub.
  r.on("GET /repos/{owner}/{repo}/commits", async (ctx) => {
    const repo = w.repo(ctx);
    const from = String(ctx.params.sha ?? repo.defaultBranch);
    const head = await repo.git.resolveCommitish(from);
    if (!head) throw notFound();
    const page = paginate(ctx, w.shapes.api, await repo.git.revList([head]));
    const body = await Promise.all(page.body.map((sha) => commitJson(repo, sha, false)));
    return { ...page, body };
  });

  r.on("GET /repos/{owner}/{repo}/commits/{ref}", async (ctx) => {
    const repo = w.repo(ctx);
    const sha = await repo.git.resolveCommitish(String(ctx.params.ref));
    if (!sha) throw notFound();
    return { status: 200, body: await commitJson(repo, sha, true) };
  });

  r.on("GET /repos/{owner}/{repo}/compare/{basehead}", async (ctx) => {
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
    for (const sha of ahead.slice(0, 250)) commits.push(await commitJson(repo, sha, false));
    const files = await repo.git.changedFiles(mb, head);
    return {
      status: 200,
      body: {
        url: `${w.shapes.api}/repos/${repo.fullName}/compare/${ctx.params.basehead}`,
        html_url: `${w.shapes.html}/${repo.fullName}/compare/${ctx.params.basehead}`,
        permalink_url: `${w.shapes.html}/${repo.fullName}/compare/${base}...${head}`,
        diff_url: `${w.shapes.html}/${repo.fullName}/compare/${ctx.params.basehead}.diff`,
        patch_url: `${w.shapes.html}/${repo.fullName}/compare/${ctx.params.basehead}.patch`,
        base_commit: await commitJson(repo, base, false),
        merge_base_commit: await commitJson(repo, mb, false),
        status,
        ahead_by: ahead.length,
        behind_by: behind.length,
        total_commits: ahead.length,
        commits,
        files: files.map((f) => ({
          sha: head,
          filename: f.path,
          status: fileStatus(f.status),
          additions: 0,
          deletions: 0,
          changes: 0,
          blob_url: "",
          raw_url: "",
          contents_url: "",
        })),
      },
    };
  });
}

function fileStatus(s: string): string {
  return s === "A" ? "added" : s === "D" ? "removed" : "modified";
}
