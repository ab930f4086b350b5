import { describe, expect, it } from "vitest";
import { slugify, taskBranchName, truncateForGitHub } from "../../src/core/branch.ts";

describe("taskBranchName", () => {
  it("builds fleet/<issue>-<slug>", () => {
    expect(taskBranchName(42, "Fix the login bug")).toBe("fleet/42-fix-the-login-bug");
  });

  it("folds accents and strips unsafe characters", () => {
    expect(taskBranchName(1, "Café: résumé `rm -rf /`; $(whoami) & | > ~ ^ : ? * [ \\ ..lock")).toBe(
      "fleet/1-cafe-resume-rm-rf-whoami-lock",
    );
  });

  it("caps the slug at 40 characters without a trailing dash", () => {
    const name = taskBranchName(7, `${"a".repeat(39)} bcd`);
    const slug = name.slice("fleet/7-".length);
    expect(slug.length).toBeLessThanOrEqual(40);
    expect(slug).toBe("a".repeat(39));
    expect(slugify("word ".repeat(30)).length).toBeLessThanOrEqual(40);
  });

  it("never produces .. or a .lock suffix", () => {
    for (const title of ["x..y", "config.lock", "...", "a.lock.lock"]) {
      const b = taskBranchName(3, title);
      expect(b).not.toContain("..");
      expect(b.endsWith(".lock")).toBe(false);
      expect(b).toMatch(/^fleet\/3(-[a-z0-9]+(-[a-z0-9]+)*)?$/);
    }
  });

  it("falls back to fleet/<issue> when nothing usable is left", () => {
    expect(taskBranchName(9, "日本語のタイトル")).toBe("fleet/9");
    expect(taskBranchName(9, "")).toBe("fleet/9");
  });

  it("rejects a bad issue number", () => {
    expect(() => taskBranchName(0, "x")).toThrow("issue must be a positive whole number, got 0");
    expect(() => taskBranchName(1.5, "x")).toThrow(RangeError);
  });
});

describe("truncateForGitHub", () => {
  it("returns short text unchanged", () => {
    expect(truncateForGitHub("hello", 10)).toBe("hello");
    expect(truncateForGitHub("x".repeat(65_536))).toHaveLength(65_536);
  });

  it("cuts at a line boundary and says how much was cut", () => {
    const text = Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n");
    const out = truncateForGitHub(text, 300);
    expect(out.length).toBeLessThanOrEqual(300);
    const [kept, note] = out.split("\n\n_… ");
    expect(text.startsWith(kept!)).toBe(true);
    expect(text[kept!.length]).toBe("\n");
    expect(note).toMatch(/^[\d,]+ characters truncated; the full log is in the run's artifacts\._$/);
    expect(Number(note!.split(" ")[0]!.replace(/,/g, ""))).toBe(text.length - kept!.length);
  });

  it("cuts mid-line when one line is longer than the limit", () => {
    const out = truncateForGitHub("y".repeat(1000), 200, "see the run");
    expect(out.length).toBeLessThanOrEqual(200);
    expect(out).toMatch(/^y+\n\n_… [\d,]+ characters truncated; see the run\._$/);
  });

  it("closes a code fence left open by the cut", () => {
    const text = `intro\n\`\`\`\n${"log line\n".repeat(100)}\`\`\`\n`;
    const out = truncateForGitHub(text, 300);
    expect(out.length).toBeLessThanOrEqual(300);
    expect(out).toContain("\n```\n\n_…");
  });

  it("does not split a surrogate pair", () => {
    const out = truncateForGitHub("😀".repeat(200), 150);
    expect(out.length).toBeLessThanOrEqual(150);
    expect(out.split("\n")[0]).toMatch(/^(😀)+$/u);
  });

  it("uses the default GitHub limit", () => {
    const out = truncateForGitHub("abc\n".repeat(30_000));
    expect(out.length).toBeLessThanOrEqual(65_536);
    expect(out).toContain("characters truncated");
  });
});
