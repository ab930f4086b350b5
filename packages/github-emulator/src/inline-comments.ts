import { validationFailed } from "./http-error.ts";
import type { Body } from "./router.ts";
import { type Issue, nowIso, type Repo, type Review, type ReviewComment } from "./state.ts";
import type { World } from "./world.ts";

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

/** An inline comment as a request body writes it (`path`, `body`, `line`, `side`, `start_line`, `start_side`). */
export function inlineCommentInput(c: Body): InlineCommentInput {
  return {
    path: String(c.path),
    body: String(c.body ?? ""),
    ...(typeof c.line === "number" ? { line: c.line } : {}),
    ...(typeof c.side === "string" ? { side: c.side } : {}),
    ...(typeof c.start_line === "number" ? { startLine: c.start_line } : {}),
    ...(typeof c.start_side === "string" ? { startSide: c.start_side } : {}),
  };
}

/** An inline comment checked against the diff: the line it is on and the hunk GitHub shows above it. */
export type ResolvedInlineComment = InlineCommentInput & {
  line: number;
  side: "LEFT" | "RIGHT";
  diffHunk: string;
};

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
  comments: ResolvedInlineComment[],
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
): Promise<ResolvedInlineComment[]> {
  if (raw === undefined) return [];
  const list = raw as Body[];
  const out = [];
  for (const [n, c] of list.entries()) {
    const input: InlineCommentInput = { ...inlineCommentInput(c), where: `comments[${n}]` };
    out.push({ ...input, ...(await resolveInlineComment(repo, i, commitId, input)) });
  }
  return out;
}
