import { validationFailed } from "../http-error.ts";
import {
  type InlineCommentInput,
  inlineCommentInput,
  publishInlineComments,
  resolveInlineComment,
} from "../inline-comments.ts";
import { findPull } from "../pull-requests.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { type Issue, nowIso, type Repo, type Review, type ReviewComment } from "../state.ts";
import { paginate, type World } from "../world.ts";

/**
 * Inline review comments on pull requests: list and create, a lone comment being a one-comment
 * review (https://docs.github.com/en/rest/pulls/comments).
 */
export function registerReviewCommentRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", (ctx) => {
    const repo = w.repo(ctx);
    const i = findPull(repo, ctx.params.pull_number);
    const sort = String(ctx.params.sort ?? "created");
    const since = ctx.params.since ? Date.parse(String(ctx.params.since)) : undefined;
    const at = (c: ReviewComment) => Date.parse(sort === "updated" ? c.updatedAt : c.createdAt);
    let list = [...(i.pull!.reviewComments ?? [])].filter(
      (c) => since === undefined || Date.parse(c.updatedAt) >= since,
    );
    list = list.sort((a, b) => at(a) - at(b) || a.id - b.id);
    if (String(ctx.params.direction ?? "asc") === "desc") list.reverse();
    return paginate(
      ctx,
      w.shapes.api,
      list.map((c) => w.shapes.reviewComment(repo, i, c, w.association(repo))),
    );
  });

  r.on("POST /repos/{owner}/{repo}/pulls/{pull_number}/comments", (ctx) => createReviewComment(w, ctx));
}

const invalid = (field: string, message?: string) =>
  validationFailed([
    { resource: "PullRequestReviewComment", code: "invalid", field, ...(message ? { message } : {}) },
  ]);

/** What a new comment is on: the comment it replies to (same file and line), or the request's file and line. */
async function commentTarget(repo: Repo, i: Issue, b: Body) {
  if (typeof b.in_reply_to === "number") {
    const parent = i.pull!.reviewComments?.find((c) => c.id === b.in_reply_to);
    if (!parent) throw invalid("in_reply_to");
    const input: InlineCommentInput = {
      path: parent.path,
      body: String(b.body ?? ""),
      line: parent.line,
      side: parent.side,
    };
    return { input, commitId: parent.commitId, inReplyTo: parent.id };
  }
  const commitId = String(b.commit_id);
  if (!(await repo.git.resolveCommitish(commitId)) || !(await repo.git.isAncestor(commitId, i.pull!.headSha)))
    throw invalid("commit_id", "commit_id is not part of the pull request");
  return { input: inlineCommentInput(b), commitId, inReplyTo: undefined };
}

async function createReviewComment(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx);
  const i = findPull(repo, ctx.params.pull_number);
  const by = w.actingUser(ctx);
  const { input, commitId, inReplyTo } = await commentTarget(repo, i, ctx.body as Body);
  const resolved = await resolveInlineComment(repo, i, commitId, input);
  const review: Review = {
    id: w.state.nextId(),
    user: by,
    body: "",
    state: "COMMENTED",
    commitId,
    submittedAt: nowIso(),
  };
  i.pull!.reviews.push(review);
  const [rc] = publishInlineComments(w, repo, i, review, [{ ...input, ...resolved }], inReplyTo);
  // GitHub wraps a lone comment in a review of its own and reports that review as submitted.
  w.emit(repo, "pull_request_review", {
    action: "submitted",
    review: w.shapes.review(repo, i, review, w.association(repo), "event"),
    pull_request: w.simplePullJson(repo, i),
  });
  return {
    status: 201,
    body: w.shapes.reviewComment(repo, i, rc!, w.association(repo)),
    headers: { location: `${w.shapes.api}/repos/${repo.fullName}/pulls/comments/${rc!.id}` },
  };
}
