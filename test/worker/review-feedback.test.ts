import { describe, expect, it } from "vitest";
import { renderReviewFeedback } from "../../src/render/review-feedback.ts";

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

  it("lists comments made on an older commit apart, briefly, after the current ones", () => {
    const text = renderReviewFeedback(7, "now rename the file", [
      { author: "mona", path: "src/a.js", line: 3, body: "Old\nround.", earlier: true },
      { author: "mona", path: "src/b.js", line: 9, body: "New round." },
    ]);
    const current = text.indexOf('<review-comment author="mona" file="src/b.js" line="9">');
    const earlier = text.indexOf("Earlier inline comments, made on an older commit");
    expect(current).toBeGreaterThan(0);
    expect(earlier).toBeGreaterThan(current);
    expect(text).toContain("- src/a.js:3 (@mona): Old round.");
    expect(text).not.toContain('file="src/a.js"');
  });
});
