import { describe, expect, it } from "vitest";
import {
  hasSkipInstruction,
  matchesPatterns,
  parseOn,
  patternRegExp,
  triggers,
} from "../src/workflow-triggers.ts";

const on = (v: unknown) => parseOn(v)!;

describe("a workflow's on:", () => {
  it("reads the string, list and map forms; anything else is not valid", () => {
    expect([...on("push").keys()]).toEqual(["push"]);
    expect([...on(["push", "pull_request"]).keys()]).toEqual(["push", "pull_request"]);
    expect(on({ push: null, pull_request: { branches: ["main"] } }).get("pull_request")).toEqual({
      branches: ["main"],
    });
    expect(parseOn(undefined)).toBeUndefined();
    expect(parseOn(42)).toBeUndefined();
    expect(parseOn([1])).toBeUndefined();
    expect(parseOn({ push: "main" })).toBeUndefined();
  });

  it("matches filter patterns as GitHub's cheat sheet says", () => {
    expect(patternRegExp("feature/*").test("feature/my-branch")).toBe(true);
    expect(patternRegExp("feature/*").test("feature/your/branch")).toBe(false);
    expect(patternRegExp("feature/**").test("feature/your/branch")).toBe(true);
    expect(patternRegExp("**").test("any/thing")).toBe(true);
    expect(patternRegExp("v2*").test("v2.0")).toBe(true);
    expect(patternRegExp("v[12].[0-9]+.[0-9]+").test("v1.10.1")).toBe(true);
    expect(patternRegExp("v[12].[0-9]+.[0-9]+").test("v3.1.1")).toBe(false);
    expect(patternRegExp("v1.?").test("v1.")).toBe(true);
    expect(patternRegExp("*.js").test("app.js")).toBe(true);
    expect(patternRegExp("*.js").test("src/app.js")).toBe(false);
    expect(patternRegExp("**.js").test("src/app.js")).toBe(true);
    expect(patternRegExp("docs/*").test("docs/README.md")).toBe(true);
    expect(patternRegExp("a\\*b").test("a*b")).toBe(true);
    expect(patternRegExp("a\\*b").test("axb")).toBe(false);
    // The last matching pattern decides: a negation excludes, a later positive includes again.
    expect(matchesPatterns("releases/10-beta", ["releases/**", "!releases/**-alpha"])).toBe(true);
    expect(matchesPatterns("releases/10-alpha", ["releases/**", "!releases/**-alpha"])).toBe(false);
    expect(matchesPatterns("releases/10-alpha", ["releases/**", "!releases/**-alpha", "releases/10*"])).toBe(
      true,
    );
  });

  it("filters push by branch and tag, pull_request by base branch and type, and paths", () => {
    const push = (f: Record<string, unknown>, facts: Partial<Parameters<typeof triggers>[1]>) =>
      triggers(on({ push: f }), { event: "push", ...facts });
    expect(push({}, { branch: "fleet/state" })).toBe(true);
    expect(push({}, { tag: "v1" })).toBe(true);
    expect(push({ branches: ["main"] }, { branch: "main" })).toBe(true);
    expect(push({ branches: ["main"] }, { branch: "fleet/state" })).toBe(false);
    // Only branch filters: no run for tags; only tag filters: no run for branches.
    expect(push({ branches: ["main"] }, { tag: "v1" })).toBe(false);
    expect(push({ tags: ["v*"] }, { branch: "main" })).toBe(false);
    expect(push({ tags: ["v*"] }, { tag: "v1" })).toBe(true);
    expect(push({ "branches-ignore": ["fleet/**"] }, { branch: "fleet/state" })).toBe(false);
    expect(push({ "branches-ignore": ["fleet/**"] }, { branch: "main" })).toBe(true);
    // A filter with its -ignore twin is an invalid workflow: it runs for nothing.
    expect(push({ branches: ["main"], "branches-ignore": ["x"] }, { branch: "main" })).toBe(false);
    expect(push({ paths: ["docs/**"] }, { branch: "main", paths: ["src/a.ts"] })).toBe(false);
    expect(push({ paths: ["docs/**"] }, { branch: "main", paths: ["src/a.ts", "docs/b.md"] })).toBe(true);
    expect(push({ "paths-ignore": ["docs/**"] }, { branch: "main", paths: ["docs/b.md"] })).toBe(false);
    expect(push({ "paths-ignore": ["docs/**"] }, { branch: "main", paths: ["docs/b.md", "a.ts"] })).toBe(
      true,
    );
    // Path filters are not evaluated for tags.
    expect(push({ paths: ["docs/**"] }, { tag: "v1", paths: ["src/a.ts"] })).toBe(true);

    const pr = (f: Record<string, unknown>, action: string, branch = "main") =>
      triggers(on({ pull_request: f }), { event: "pull_request", action, branch });
    expect(pr({}, "opened")).toBe(true);
    expect(pr({}, "synchronize")).toBe(true);
    expect(pr({}, "reopened")).toBe(true);
    expect(pr({}, "closed")).toBe(false);
    expect(pr({ types: ["closed"] }, "closed")).toBe(true);
    expect(pr({ types: ["opened"] }, "synchronize")).toBe(false);
    expect(pr({ branches: ["main"] }, "opened", "develop")).toBe(false);
    expect(triggers(on("push"), { event: "pull_request", action: "opened", branch: "main" })).toBe(false);
  });

  it("finds GitHub's skip instructions and the skip-checks trailer", () => {
    for (const s of ["[skip ci]", "[ci skip]", "[no ci]", "[skip actions]", "[actions skip]"]) {
      expect(hasSkipInstruction(`Update docs ${s}`)).toBe(true);
      expect(hasSkipInstruction(`Update docs\n\nbody ${s} here`)).toBe(true);
    }
    expect(hasSkipInstruction("Update docs")).toBe(false);
    expect(hasSkipInstruction("skip ci please")).toBe(false);
    expect(hasSkipInstruction("[SKIP CI]")).toBe(false);
    expect(hasSkipInstruction("Update\n\n\nskip-checks: true")).toBe(true);
    expect(hasSkipInstruction("Update\n\n\nskip-checks:true\n")).toBe(true);
    expect(hasSkipInstruction("Update\n\n\nSigned-off-by: A <a@b>\nskip-checks: true")).toBe(true);
    // skip-checks must be the last trailer, in the trailers paragraph after two empty lines.
    expect(hasSkipInstruction("Update\n\n\nskip-checks: true\nSigned-off-by: A <a@b>")).toBe(false);
    expect(hasSkipInstruction("Update\n\nskip-checks: true")).toBe(false);
    expect(hasSkipInstruction("skip-checks: true")).toBe(false);
    expect(hasSkipInstruction("Update\n\n\nskip-checks: false")).toBe(false);
  });
});
