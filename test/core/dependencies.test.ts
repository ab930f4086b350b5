import { describe, expect, it } from "vitest";
import { parseDependencies, withDependencyLines } from "../../src/core/dependencies.ts";

describe("parseDependencies", () => {
  it.each([
    ["Depends on #12", [12]],
    ["Blocked by #12, #13", [12, 13]],
    ["depends on: #4 and #5", [4, 5]],
    ["DEPENDS ON #7", [7]],
    ["blocked   by:#3, and #1 & #2", [1, 2, 3]],
    ["This depends on #8 for the API, see also #9", [8]],
    ["Depends on #1\nBlocked by #2\ndepends on #1", [1, 2]],
    ["no dependencies here #5", []],
    ["depends on nothing", []],
    ["Depends on #0", []],
    ["Depends on #12abc", []],
  ])("%j -> %j", (body, expected) => {
    expect(parseDependencies(body)).toEqual(expected);
  });

  it("ignores code blocks and quotes", () => {
    const body = [
      "```",
      "Depends on #1",
      "```",
      "> Blocked by #2",
      "    depends on #3",
      "Depends on #4",
    ].join("\n");
    expect(parseDependencies(body)).toEqual([4]);
  });

  it("takes a list under a keyword line", () => {
    const body = "Depends on:\n- #4\n- [x] #5\n* o/r#6\n\n- #7";
    expect(parseDependencies(body, "o/r")).toEqual([4, 5, 6]);
  });

  it("accepts owner/repo#n and issue URLs only for the same repository", () => {
    const body =
      "Depends on acme/app#12, other/lib#13, https://github.com/Acme/App/issues/14 and https://github.com/x/y/pull/15";
    expect(parseDependencies(body, "acme/app")).toEqual([12, 14]);
    expect(parseDependencies(body)).toEqual([]);
  });

  it("reads a large body with many repeated refs", () => {
    const body = `${"Depends on #1, ".repeat(20_000)}\n${"x".repeat(100_000)}`;
    expect(parseDependencies(body)).toEqual([1]);
  });
});

describe("withDependencyLines", () => {
  it("replaces the lines that only name dependencies, and keeps the rest of the text", () => {
    const body = "Do the thing.\n\nDepends on #3\nBlocked by: #4 and #5\n\nMore text.";
    expect(withDependencyLines(body, [7, 6])).toBe(
      "Do the thing.\n\n\nMore text.\n\nDepends on #6\nDepends on #7",
    );
    expect(withDependencyLines("Do it.\n\nDepends on #3", [])).toBe("Do it.");
    expect(withDependencyLines("", [2])).toBe("Depends on #2");
  });

  it("leaves code blocks and sentences alone: parseDependencies tells what the text still names", () => {
    const body = "```\nDepends on #9\n```\nAfter #8 lands; this depends on #8 too.";
    const next = withDependencyLines(body, [2]);
    expect(next).toContain("```\nDepends on #9\n```");
    expect(parseDependencies(next)).toEqual([2, 8]);
  });
});
