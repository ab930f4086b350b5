import { describe, expect, it } from "vitest";
import { parseDependencies } from "../../src/core/dependencies.ts";

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
