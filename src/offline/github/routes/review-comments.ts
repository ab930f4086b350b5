import { notFound, validationFailed } from "../http-error.ts";
import type { Router } from "../router.ts";
import { type Issue, nowIso, type Repo, type Review, type ReviewComment, type User } from "../state.ts";
import { paginate, type World } from "../world.ts";

type Body = Record<string, unknown>;

/** What a client asks for: one inline comment on a file and line of the pull request's diff. */
export interface InlineCommentInput {
  path: string;
  body: string;
  line?: number;
  side?: string;
  startLine?: number;
  startSide?: string;
  /** Where the comment array sits in the request, for error messages ("comments[1]"). */
  where?: string;
}

const threadError = (field: "path" | "line", message: string) =>
  validationFailed([
    {
      resource: "PullRequestReviewComment",
      code: "custom",
      field: `pull_request_review_thread.${field}`,
      message,
    },
  ]);

interface Hunk {
  header: string;
  /** Lines after the header with the line number each has on the LEFT (old) and RIGHT (new) side. */
  lines: Array<{ text: string; left: number | null; right: number | null }>;
}

function parseHunks(diff: string): Hunk[] {
  const hunks: Hunk[] = [];
  let cur: Hunk | undefined;
  let left = 0;
  let right = 0;
  for (const text of diff.split("\n")) {
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text);
    if (m) {
      cur = { header: text, lines: [] };
      hunks.push(cur);
      left = Number(m[1]);
      right = Number(m[2]);
      continue;
    }
    if (!cur || text.startsWith("\\")) continue;
    if (text.startsWith("+")) cur.lines.push({ text, left: null, right: right++ });
    else if (text.startsWith("-")) cur.lines.push({ text, left: left++, right: null });
    else if (text.startsWith(" ")) cur.lines.push({ text, left: left++, right: right++ });
  }
  return hunks;
}

/**
 * Checks one inline comment against the pull request's diff at `commitId` and returns the diff
 * hunk GitHub shows above it (from the hunk header down to the commented line). As on GitHub, the
 * file must be part of the diff and the line must lie in one of its hunks.
 */
export async function resolveInlineComment(
  repo: Repo,
  i: Issue,
  commitId: string,
  c: InlineCommentInput,
): Promise<{ line: number; side: "LEFT" | "RIGHT"; diffHunk: string }> {
  const p = i.pull!;
  const at = c.where ? `${c.where}: ` : "";
  if (!c.body.trim())
    throw validationFailed([{ resource: "PullRequestReviewComment", code: "missing_field", field: "body" }]);
  if (c.line === undefined || !Number.isInteger(c.line) || c.line < 1)
    throw threadError("line", `${at}a line number of the file is required (positions are not supported)`);
  const side = c.side === "LEFT" ? "LEFT" : "RIGHT";
  if (c.side !== undefined && c.side !== "LEFT" && c.side !== "RIGHT")
    throw threadError("line", `${at}side must be LEFT or RIGHT`);
  const base = (await repo.git.mergeBase(p.baseSha, commitId)) ?? p.baseSha;
  const diff = (
    await repo.git.git(["diff", "--no-renames", "-U3", base, commitId, "--", c.path], { reject: false })
  ).stdout;
  const hunks = parseHunks(diff);
  if (hunks.length === 0)
    throw threadError("path", `${at}pull_request_review_thread.path could not be resolved`);
  const key = side === "LEFT" ? "left" : "right";
  for (const h of hunks) {
    const idx = h.lines.findIndex((l) => l[key] === c.line);
    if (idx < 0) continue;
    if (c.startLine !== undefined) {
      const startKey = c.startSide === "LEFT" ? "left" : "right";
      if (c.startLine > c.line || !h.lines.slice(0, idx + 1).some((l) => l[startKey] === c.startLine))
        throw threadError("line", `${at}start_line must be part of the same hunk and not after line`);
    }
    const diffHunk = [h.header, ...h.lines.slice(0, idx + 1).map((l) => l.text)].join("\n");
    return { line: c.line, side, diffHunk };
  }
  throw threadError("line", `${at}pull_request_review_thread.line must be part of the diff`);
}

/** Stores checked inline comments under `review` and sends one `pull_request_review_comment.created` each. */
export function publishInlineComments(
  w: World,
  repo: Repo,
  i: Issue,
  review: Review,
  comments: Array<InlineCommentInput & { line: number; side: "LEFT" | "RIGHT"; diffHunk: string }>,
  inReplyTo?: number,
): ReviewComment[] {
  const p = i.pull!;
  p.reviewComments ??= [];
  const out: ReviewComment[] = [];
  for (const c of comments) {
    const now = nowIso();
    const rc: ReviewComment = {
      id: w.state.nextId(),
      reviewId: review.id,
      user: review.user,
      body: c.body,
      path: c.path,
      line: c.line,
      side: c.side,
      startLine: c.startLine ?? null,
      startSide: c.startLine !== undefined ? (c.startSide === "LEFT" ? "LEFT" : "RIGHT") : null,
      commitId: review.commitId,
      diffHunk: c.diffHunk,
      ...(inReplyTo !== undefined ? { inReplyTo } : {}),
      createdAt: now,
      updatedAt: now,
    };
    p.reviewComments.push(rc);
    out.push(rc);
    i.updatedAt = now;
    w.emit(repo, "pull_request_review_comment", {
      action: "created",
      comment: w.shapes.reviewComment(repo, i, rc, w.association(repo)),
      pull_request: w.simplePullJson(repo, i),
    });
  }
  return out;
}

/** The `comments` of a create-review request, read and checked; nothing is stored if one is wrong. */
export async function readReviewCommentInputs(
  repo: Repo,
  i: Issue,
  commitId: string,
  raw: unknown,
): Promise<Array<InlineCommentInput & { line: number; side: "LEFT" | "RIGHT"; diffHunk: string }>> {
  if (raw === undefined) return [];
  const list = raw as Body[];
  const out = [];
  for (const [n, c] of list.entries()) {
    const input: InlineCommentInput = {
      path: String(c.path),
      body: String(c.body ?? ""),
      ...(typeof c.line === "number" ? { line: c.line } : {}),
      ...(typeof c.side === "string" ? { side: c.side } : {}),
      ...(typeof c.start_line === "number" ? { startLine: c.start_line } : {}),
      ...(typeof c.start_side === "string" ? { startSide: c.start_side } : {}),
      where: `comments[${n}]`,
    };
    out.push({ ...input, ...(await resolveInlineComment(repo, i, commitId, input)) });
  }
  return out;
}

/** Inline review comments on pull requests: list and create (a lone comment is a one-comment review). */
export function registerReviewCommentRoutes(r: Router, w: World): void {
  const pull = (repo: Repo, n: unknown): Issue => {
    const i = repo.issues.get(Number(n));
    if (!i?.pull) throw notFound();
    return i;
  };
  const json = (repo: Repo, i: Issue, c: ReviewComment) =>
    w.shapes.reviewComment(repo, i, c, w.association(repo));

  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
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
      list.map((c) => json(repo, i, c)),
    );
  });

  r.on("POST /repos/{owner}/{repo}/pulls/{pull_number}/comments", async (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    const by: User = w.actingUser(ctx);
    const b = ctx.body as Body;
    let input: InlineCommentInput;
    let commitId = String(b.commit_id);
    let inReplyTo: number | undefined;
    if (typeof b.in_reply_to === "number") {
      const parent = i.pull!.reviewComments?.find((c) => c.id === b.in_reply_to);
      if (!parent)
        throw validationFailed([
          { resource: "PullRequestReviewComment", code: "invalid", field: "in_reply_to" },
        ]);
      inReplyTo = parent.id;
      commitId = parent.commitId;
      input = { path: parent.path, body: String(b.body ?? ""), line: parent.line, side: parent.side };
    } else {
      if (
        !(await repo.git.resolveCommitish(commitId)) ||
        !(await repo.git.isAncestor(commitId, i.pull!.headSha))
      )
        throw validationFailed([
          {
            resource: "PullRequestReviewComment",
            code: "invalid",
            field: "commit_id",
            message: "commit_id is not part of the pull request",
          },
        ]);
      input = {
        path: String(b.path),
        body: String(b.body ?? ""),
        ...(typeof b.line === "number" ? { line: b.line } : {}),
        ...(typeof b.side === "string" ? { side: b.side } : {}),
        ...(typeof b.start_line === "number" ? { startLine: b.start_line } : {}),
        ...(typeof b.start_side === "string" ? { startSide: b.start_side } : {}),
      };
    }
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
      review: w.shapes.review(repo, i, review, w.association(repo)),
      pull_request: w.simplePullJson(repo, i),
    });
    return {
      status: 201,
      body: json(repo, i, rc!),
      headers: { location: `${w.shapes.api}/repos/${repo.fullName}/pulls/comments/${rc!.id}` },
    };
  });
}
