// The prompt text of a review round: the maintainer's instructions and the inline comments they made; pure.

/** An inline review comment as the prompt shows it. */
export interface InlineComment {
  author: string;
  path: string;
  line?: number;
  body: string;
  /** The end of the diff hunk GitHub shows above the comment: the code it is about. */
  code?: string;
  /** Made on an older commit of the PR: an earlier review round, already handed to a previous run. */
  earlier?: boolean;
}

export function renderReviewFeedback(
  pr: number,
  instructions: string,
  comments: readonly InlineComment[],
): string {
  const out = [
    `## Review feedback on pull request #${pr}`,
    "",
    "This branch already holds your earlier work on the issue, and its pull request is open. A maintainer asked for changes:",
    "",
    "<instructions>",
    instructions.trim(),
    "</instructions>",
  ];
  const current = comments.filter((c) => !c.earlier);
  const earlier = comments.filter((c) => c.earlier);
  if (current.length > 0) {
    out.push("", "Inline review comments on the pull request:");
    for (const c of current) {
      out.push(
        "",
        `<review-comment author="${c.author}" file="${c.path}"${c.line ? ` line="${c.line}"` : ""}>`,
        ...(c.code
          ? ["On this code (the end of the diff, the commented line last):", "```diff", c.code, "```"]
          : []),
        c.body.trim(),
        "</review-comment>",
      );
    }
  }
  if (earlier.length > 0) {
    out.push(
      "",
      "Earlier inline comments, made on an older commit of this pull request (a previous run had them already; act on them only if the instructions say so):",
      "",
    );
    for (const c of earlier) {
      const body = c.body.trim().replace(/\s+/g, " ");
      out.push(`- ${c.path}${c.line ? `:${c.line}` : ""} (@${c.author}): ${body}`);
    }
  }
  out.push(
    "",
    "Change the working directory accordingly; Fleet commits and pushes to the same pull request.",
  );
  return out.join("\n");
}
