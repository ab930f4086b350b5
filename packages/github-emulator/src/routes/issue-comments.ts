import { HttpError, notFound } from "../http-error.ts";
import { canTriage } from "../issue-changes.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { type Comment, nowIso, type Repo } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Issue comments (https://docs.github.com/en/rest/issues/comments). */
export function registerIssueCommentRoutes(r: Router, w: World): void {
  const json = (repo: Repo, c: Comment) => w.shapes.comment(repo, c, w.association(repo));

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", (ctx) => createComment(w, ctx));

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const since = ctx.params.since ? String(ctx.params.since) : undefined;
    const list = i.comments.filter((c) => !since || c.updatedAt >= since);
    return paginate(
      ctx,
      w.shapes.api,
      list.map((c) => json(repo, c)),
    );
  });

  r.on("GET /repos/{owner}/{repo}/issues/comments", (ctx) => {
    const repo = w.repo(ctx);
    const all = [...repo.issues.values()].flatMap((i) => i.comments).sort((a, b) => a.id - b.id);
    if (ctx.params.direction === "desc") all.reverse();
    return paginate(
      ctx,
      w.shapes.api,
      all.map((c) => json(repo, c)),
    );
  });

  r.on("GET /repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
    const { repo, c } = findComment(w, ctx);
    return { status: 200, body: json(repo, c) };
  });

  r.on("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => updateComment(w, ctx));
  r.on("DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => deleteComment(w, ctx));
}

/** The comment `comment_id` names, in the repository the path names (404 for another repository's). */
export function findComment(w: World, ctx: Ctx) {
  const repo = w.repo(ctx);
  const found = w.state.comments.get(Number(ctx.params.comment_id));
  if (!found || found.repo !== repo) throw notFound();
  return { repo, c: found.comment, issue: repo.issues.get(found.comment.issueNumber)! };
}

function createComment(w: World, ctx: Ctx): Reply {
  const repo = w.repo(ctx);
  const i = w.issue(repo, ctx.params.issue_number);
  const by = w.actingUser(ctx);
  if (i.locked && !canTriage(w, ctx, repo))
    throw new HttpError(403, "Unable to create comment because issue is locked.");
  const now = nowIso();
  const c: Comment = {
    id: w.state.nextId(),
    issueNumber: i.number,
    body: String((ctx.body as Body).body),
    user: by,
    createdAt: now,
    updatedAt: now,
  };
  i.comments.push(c);
  i.updatedAt = now;
  w.state.comments.set(c.id, { repo, comment: c });
  const json = w.shapes.comment(repo, c, w.association(repo));
  w.emit(repo, "issue_comment", { action: "created", issue: w.issueJson(repo, i), comment: json });
  return {
    status: 201,
    body: w.shapes.comment(repo, c, w.association(repo)),
    headers: { location: `${w.shapes.api}/repos/${repo.fullName}/issues/comments/${c.id}` },
  };
}

/** The comment's author or someone with triage rights may edit or delete it. */
function mayChange(w: World, ctx: Ctx, repo: Repo, c: Comment, what: "edit" | "delete"): void {
  if (w.actingUser(ctx).login !== c.user.login && !canTriage(w, ctx, repo))
    throw new HttpError(403, `Must have write access to ${what} this comment`);
}

function updateComment(w: World, ctx: Ctx): Reply {
  const { repo, c, issue } = findComment(w, ctx);
  mayChange(w, ctx, repo, c, "edit");
  const from = c.body;
  c.body = String((ctx.body as Body).body);
  c.updatedAt = nowIso();
  w.emit(repo, "issue_comment", {
    action: "edited",
    issue: w.issueJson(repo, issue),
    comment: w.shapes.comment(repo, c, w.association(repo)),
    changes: { body: { from } },
  });
  return { status: 200, body: w.shapes.comment(repo, c, w.association(repo)) };
}

function deleteComment(w: World, ctx: Ctx): Reply {
  const { repo, c, issue } = findComment(w, ctx);
  mayChange(w, ctx, repo, c, "delete");
  issue.comments.splice(issue.comments.indexOf(c), 1);
  w.state.comments.delete(c.id);
  w.emit(repo, "issue_comment", {
    action: "deleted",
    issue: w.issueJson(repo, issue),
    comment: w.shapes.comment(repo, c, w.association(repo)),
  });
  return { status: 204 };
}
