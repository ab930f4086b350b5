import { notFound, validationFailed } from "../http-error.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import type { Repo } from "../state.ts";
import type { World } from "../world.ts";

/** Git trees: read (optionally recursive) and build on a base tree (https://docs.github.com/en/rest/git/trees). */
export function registerGitTreeRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/git/trees/{tree_sha}", async (ctx) => {
    const repo = w.repo(ctx);
    const want = String(ctx.params.tree_sha);
    const resolved = (await repo.git.resolveCommitish(want)) ?? want;
    const t = await repo.git.objectType(resolved);
    if (t !== "tree" && t !== "commit") throw notFound();
    const treeSha = t === "commit" ? (await repo.git.readCommit(resolved))!.tree : resolved;
    const recursive =
      ctx.params.recursive !== undefined &&
      String(ctx.params.recursive) !== "0" &&
      String(ctx.params.recursive) !== "false";
    return { status: 200, body: await treeJson(w, repo, treeSha, recursive) };
  });
  r.on("POST /repos/{owner}/{repo}/git/trees", (ctx) => createTree(w, ctx));
}

async function treeJson(w: World, repo: Repo, sha: string, recursive: boolean) {
  const api = `${w.shapes.api}/repos/${repo.fullName}/git`;
  const entries = await repo.git.lsTree(sha, { recursive });
  return {
    sha,
    url: `${api}/trees/${sha}`,
    tree: entries.map((e) => ({
      path: e.path,
      mode: e.mode,
      type: e.type,
      sha: e.sha,
      ...(e.type === "blob" ? { size: e.size ?? 0 } : {}),
      url: `${api}/${e.type === "tree" ? "trees" : "blobs"}/${e.sha}`,
    })),
    truncated: false,
  };
}

/** One entry of a new tree: inline content (written as a blob), a deletion (`sha: null`) or an existing object. */
async function treeChange(repo: Repo, e: Record<string, unknown>) {
  const path = String(e.path);
  const mode = String(e.mode);
  if ("content" in e && typeof e.content === "string")
    return { path, mode, sha: await repo.git.writeBlob(e.content) };
  if (e.sha === null) return { path, mode, sha: null };
  const sha = String(e.sha);
  if (!(await repo.git.objectType(sha)))
    throw validationFailed(
      [{ resource: "Tree", field: "tree.sha", code: "invalid" }],
      `tree.sha ${sha} is not a valid ${e.type ?? "blob"}`,
    );
  return { path, mode, sha };
}

async function createTree(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const b = ctx.body as Body;
  const base = b.base_tree ? String(b.base_tree) : undefined;
  if (base && (await repo.git.objectType(base)) !== "tree" && !(await repo.git.readCommit(base)))
    throw validationFailed(
      [{ resource: "Tree", field: "base_tree", code: "invalid" }],
      "base_tree is not a valid tree oid",
    );
  const changes: Array<{ path: string; mode: string; sha: string | null }> = [];
  for (const e of b.tree as Array<Record<string, unknown>>) changes.push(await treeChange(repo, e));
  const tree = await repo.git.buildTree(base, changes);
  return {
    status: 201,
    body: await treeJson(w, repo, tree, false),
    headers: { location: `${w.shapes.api}/repos/${repo.fullName}/git/trees/${tree}` },
  };
}
