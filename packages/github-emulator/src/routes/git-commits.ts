import { identityFrom, noreplyIdentity } from "../authors.ts";
import { notFound, validationFailed } from "../http-error.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import type { World } from "../world.ts";

/** Git commit objects: read and create (https://docs.github.com/en/rest/git/commits). */
export function registerGitCommitRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/git/commits/{commit_sha}", async (ctx) => {
    const repo = w.repo(ctx);
    const c = await repo.git.readCommit(String(ctx.params.commit_sha));
    if (!c) throw notFound();
    return { status: 200, body: w.shapes.gitCommit(repo, c) };
  });
  r.on("POST /repos/{owner}/{repo}/git/commits", (ctx) => createCommit(w, ctx));
}

async function createCommit(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const b = ctx.body as Body;
  const tree = String(b.tree);
  if ((await repo.git.objectType(tree)) !== "tree")
    throw validationFailed(
      [{ resource: "Commit", field: "tree", code: "invalid" }],
      "Tree SHA does not exist",
    );
  const parents = (b.parents as string[] | undefined) ?? [];
  for (const p of parents) {
    if ((await repo.git.objectType(p)) !== "commit")
      throw validationFailed(
        [{ resource: "Commit", field: "parents", code: "invalid" }],
        "Parent SHA does not exist or is not a commit object",
      );
  }
  const author = identityFrom(b.author) ?? noreplyIdentity(w.actingUser(ctx));
  const sha = await repo.git.commitTree({
    tree,
    parents,
    message: String(b.message),
    author,
    committer: identityFrom(b.committer) ?? author,
  });
  return {
    status: 201,
    body: w.shapes.gitCommit(repo, (await repo.git.readCommit(sha))!),
    headers: { location: `${w.shapes.api}/repos/${repo.fullName}/git/commits/${sha}` },
  };
}
