import { HttpError, validationFailed } from "../http-error.ts";
import { publishInlineComments, readReviewCommentInputs } from "../inline-comments.ts";
import { findPull } from "../pull-requests.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { nowIso, type Review } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Reviews of a pull request: list and submit, with inline comments (https://docs.github.com/en/rest/pulls/reviews). */
export function registerPullReviewRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews", (ctx) => {
    const repo = w.repo(ctx);
    const i = findPull(repo, ctx.params.pull_number);
    return paginate(
      ctx,
      w.shapes.api,
      i.pull!.reviews.map((rv) => w.shapes.review(repo, i, rv, w.association(repo))),
    );
  });
  r.on("POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews", (ctx) => createReview(w, ctx));
}

/** The review a request's `event` makes; no event (or another) leaves it pending. */
const REVIEW_STATES = new Map<string, Review["state"]>([
  ["APPROVE", "APPROVED"],
  ["REQUEST_CHANGES", "CHANGES_REQUESTED"],
  ["COMMENT", "COMMENTED"],
]);

/**
 * GitHub answers a create-review request whose comment is off the diff with strings, not the
 * single-comment endpoint's error objects: `{"message": "Unprocessable Entity", "errors": ["Line could
 * not be resolved"]}` (https://docs.github.com/en/rest/pulls/reviews#create-a-review-for-a-pull-request
 * lists the 422; the body is what api.github.com returns, e.g. github.com/max-sixty/tend/pull/252).
 */
function asReviewError(error: unknown): never {
  const first =
    error instanceof HttpError
      ? (error.extra.errors as Array<{ field?: string }> | undefined)?.[0]
      : undefined;
  const field = first?.field;
  if (
    error instanceof HttpError &&
    error.status === 422 &&
    field?.startsWith("pull_request_review_thread.")
  ) {
    const what = field.endsWith(".path") ? "Path" : "Line";
    throw new HttpError(422, "Unprocessable Entity", {
      errors: [`${what} could not be resolved`],
      documentation_url: "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
      status: "422",
    });
  }
  throw error;
}

async function createReview(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx);
  const i = findPull(repo, ctx.params.pull_number);
  const by = w.actingUser(ctx);
  const b = (ctx.body as Body | undefined) ?? {};
  const event = String(b.event ?? "PENDING");
  const state = REVIEW_STATES.get(event) ?? "PENDING";
  if (by.login === i.user.login && state !== "COMMENTED" && state !== "PENDING") {
    throw validationFailed(
      [],
      `Unprocessable Entity: Can not ${event === "APPROVE" ? "approve" : "request changes on"} your own pull request`,
    );
  }
  if ((state === "CHANGES_REQUESTED" || state === "COMMENTED") && !b.body) {
    throw validationFailed(
      [],
      `Unprocessable Entity: Review Can not ${state === "COMMENTED" ? "comment" : "request changes"} without a body`,
    );
  }
  const commitId = String(b.commit_id ?? i.pull!.headSha);
  // Every inline comment is checked before anything is stored, as on GitHub.
  const inline = await readReviewCommentInputs(repo, i, commitId, b.comments).catch(asReviewError);
  const rv: Review = {
    id: w.state.nextId(),
    user: by,
    body: String(b.body ?? ""),
    state,
    commitId,
    submittedAt: nowIso(),
  };
  i.pull!.reviews.push(rv);
  // A pending review's comments stay hidden until it is submitted (not emulated); others go out first.
  if (state !== "PENDING") {
    publishInlineComments(w, repo, i, rv, inline);
    w.emit(repo, "pull_request_review", {
      action: "submitted",
      review: w.shapes.review(repo, i, rv, w.association(repo), "event"),
      pull_request: w.simplePullJson(repo, i),
    });
  }
  return { status: 200, body: w.shapes.review(repo, i, rv, w.association(repo)) };
}
