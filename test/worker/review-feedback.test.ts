import { describe, expect, it } from "vitest";
import { renderReviewFeedback } from "../../src/worker/special-runs.ts";

describe("review feedback in the agent's prompt", () => {
  it("quotes the instructions and each inline comment with its file, line and the code it is on", () => {
    const text = renderReviewFeedback(7, "rename the helper\n\n(from @mona)", [
      {
        author: "mona",
        path: "src/widget.js",
        line: 1,
        body: "Call this `formatWidget`.",
        code: "+export function helper(w) {",
      },
      { author: "lee", path: "README.md", body: "Mention it here." },
    ]);
    expect(text).toContain("## Review feedback on pull request #7");
    expect(text).toContain("<instructions>\nrename the helper\n\n(from @mona)\n</instructions>");
    expect(text).toContain(
      '<review-comment author="mona" file="src/widget.js" line="1">\nOn this code (the end of the diff, the commented line last):\n```diff\n+export function helper(w) {\n```\nCall this `formatWidget`.\n</review-comment>',
    );
    // A file-level comment has no line and no code.
    expect(text).toContain(
      '<review-comment author="lee" file="README.md">\nMention it here.\n</review-comment>',
    );
  });

  it("has no inline section when there are no inline comments", () => {
    expect(renderReviewFeedback(7, "tidy up", [])).not.toContain("Inline review comments");
  });
});
