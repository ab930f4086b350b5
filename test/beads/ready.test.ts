import { describe, expect, it } from "vitest";
import {
  type BeadDependency,
  type BeadIssue,
  blockedBy,
  findCycles,
  liveIssues,
  parseJsonl,
  readyIssues,
} from "../../src/beads/index.ts";
import { FIXTURE_FILES, readFixture } from "./helpers.ts";

const T = "2026-01-01T00:00:00Z";
const dep = (from: string, to: string, type = "blocks"): BeadDependency => ({
  issue_id: from,
  depends_on_id: to,
  type,
  created_at: T,
});
const issue = (id: string, over: Partial<BeadIssue> = {}, deps: BeadDependency[] = []): BeadIssue => ({
  id,
  title: id,
  status: "open",
  priority: 2,
  issue_type: "task",
  created_at: T,
  updated_at: T,
  ...(deps.length > 0 ? { dependencies: deps } : {}),
  ...over,
});
const readyIds = (issues: BeadIssue[], now?: string) => readyIssues(issues, { now }).map((i) => i.id);

describe("readiness like bd ready", () => {
  it("an open blocks target blocks; a closed one does not", () => {
    const issues = [
      issue("a", {}, [dep("a", "b")]),
      issue("b"),
      issue("c", {}, [dep("c", "d")]),
      issue("d", { status: "closed" }),
    ];
    expect(readyIds(issues)).toEqual(["b", "c"]);
    expect(blockedBy(issues, "a")).toEqual(["b"]);
    expect(blockedBy(issues, "c")).toEqual([]);
  });

  it("in_progress, blocked and deferred targets block; missing and tombstoned ones do not", () => {
    const issues = [
      issue("a", {}, [dep("a", "p")]),
      issue("p", { status: "in_progress" }),
      issue("b", {}, [dep("b", "q")]),
      issue("q", { status: "deferred" }),
      issue("c", {}, [dep("c", "missing")]),
      issue("d", {}, [dep("d", "t")]),
      issue("t", { status: "tombstone" }),
    ];
    expect(readyIds(issues)).toEqual(["c", "d", "p"]);
  });

  it("lists open and in_progress, not blocked/closed/deferred status, pinned or non-work types", () => {
    const issues = [
      issue("a"),
      issue("b", { status: "in_progress" }),
      issue("c", { status: "blocked" }),
      issue("d", { status: "closed" }),
      issue("e", { pinned: true }),
      issue("f", { issue_type: "gate" }),
      issue("g", { status: "deferred" }),
    ];
    expect(readyIds(issues)).toEqual(["a", "b"]);
    expect(readyIssues(issues, { statuses: ["open"] }).map((i) => i.id)).toEqual(["a"]);
  });

  it("a child of a blocked parent is blocked, transitively", () => {
    const issues = [
      issue("epic", { issue_type: "epic" }, [dep("epic", "gate")]),
      issue("gate"),
      issue("child", {}, [dep("child", "epic", "parent-child")]),
      issue("grandchild", {}, [dep("grandchild", "child", "parent-child")]),
      issue("other-child", {}, [dep("other-child", "free", "parent-child")]),
      issue("free", { issue_type: "epic" }),
    ];
    expect(readyIds(issues)).toEqual(["free", "gate", "other-child"]);
    expect(blockedBy(issues, "child")).toEqual(["epic"]);
    expect(blockedBy(issues, "grandchild")).toEqual(["child"]);
  });

  it("related and discovered-from never block", () => {
    const issues = [
      issue("a", {}, [dep("a", "b", "related"), dep("a", "c", "discovered-from")]),
      issue("b"),
      issue("c"),
    ];
    expect(readyIds(issues)).toEqual(["a", "b", "c"]);
  });

  it("a blocker chain blocks only its direct dependents; closing unblocks", () => {
    const issues = [issue("a", {}, [dep("a", "b")]), issue("b", {}, [dep("b", "c")]), issue("c")];
    expect(readyIds(issues)).toEqual(["c"]);
    issues[2]!.status = "closed";
    expect(readyIds(issues)).toEqual(["b"]);
  });

  it("conditional-blocks waits for a failed close", () => {
    const issues = [
      issue("a", {}, [dep("a", "x", "conditional-blocks")]),
      issue("x", { status: "closed", close_reason: "done" }),
      issue("b", {}, [dep("b", "y", "conditional-blocks")]),
      issue("y", { status: "closed", close_reason: "Failed: tests" }),
    ];
    expect(readyIds(issues)).toEqual(["b"]);
  });

  it("hides issues deferred into the future when now is given", () => {
    const issues = [issue("a", { defer_until: "2026-02-01T00:00:00Z" }), issue("b")];
    expect(readyIds(issues, "2026-01-15T00:00:00Z")).toEqual(["b"]);
    expect(readyIds(issues, "2026-03-01T00:00:00Z")).toEqual(["a", "b"]);
  });

  it("orders by priority, then age", () => {
    const issues = [
      issue("late", { priority: 1, created_at: "2026-01-03T00:00:00Z" }),
      issue("p3", { priority: 3 }),
      issue("early", { priority: 1, created_at: "2026-01-02T00:00:00Z" }),
      issue("p0", { priority: 0 }),
    ];
    expect(readyIds(issues)).toEqual(["p0", "early", "late", "p3"]);
  });

  it("matches the open issues of the Dec 2025 beads export", () => {
    const issues = liveIssues(parseJsonl(readFixture(FIXTURE_FILES.dec2025)));
    const open = issues.filter((i) => i.status === "open" || i.status === "in_progress");
    const ready = readyIssues(issues);
    expect(ready.length).toBeLessThanOrEqual(open.length);
    for (const i of open) {
      const blockers = blockedBy(issues, i.id);
      expect(ready.includes(i)).toBe(blockers.length === 0);
    }
  });
});

describe("findCycles", () => {
  it("reports blocks and parent-child cycles, each once", () => {
    const issues = [
      issue("a", {}, [dep("a", "b")]),
      issue("b", {}, [dep("b", "c")]),
      issue("c", {}, [dep("c", "a")]),
      issue("x", {}, [dep("x", "y", "parent-child")]),
      issue("y", {}, [dep("y", "x")]),
      issue("self", {}, [dep("self", "self")]),
      issue("free", {}, [dep("free", "a")]),
      issue("r1", {}, [dep("r1", "r2", "related")]),
      issue("r2", {}, [dep("r2", "r1", "related")]),
    ];
    expect(findCycles(issues)).toEqual([["a", "b", "c"], ["self"], ["x", "y"]]);
  });

  it("terminates on cyclic graphs in readiness too", () => {
    const issues = [
      issue("a", {}, [dep("a", "b", "parent-child")]),
      issue("b", {}, [dep("b", "a", "parent-child"), dep("b", "c")]),
      issue("c"),
    ];
    expect(readyIds(issues)).toEqual(["c"]);
    expect(blockedBy(issues, "a")).toEqual(["b"]);
  });

  it("handles a 100k-long chain without recursion", () => {
    const n = 100_000;
    const issues = Array.from({ length: n }, (_, i) => issue(`n${i}`, {}, [dep(`n${i}`, `n${(i + 1) % n}`)]));
    const cycles = findCycles(issues);
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toHaveLength(n);
  });
});
