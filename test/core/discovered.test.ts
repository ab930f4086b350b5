import { describe, expect, it } from "vitest";
import {
  discoveredMarker,
  filedDiscoveries,
  followUpKey,
  followUpTitle,
  planDiscoveredIssues,
} from "../../src/core/discovered.ts";

const base = {
  taskId: "fl-a3f",
  issue: 12,
  pr: 14,
  coderLabel: "fleet:claude",
  autoLabel: false,
  existingBodies: [] as string[],
};

describe("discovered work", () => {
  it("files one issue per follow-up, saying where it was discovered, unlabeled by default", () => {
    const plan = planDiscoveredIssues({
      ...base,
      followUps: [
        "Add tests for the parser.",
        "- Document the `--dry-run` flag\nIt is missing from the README.",
      ],
    });
    expect(plan.map((p) => p.title)).toEqual(["Add tests for the parser", "Document the `--dry-run` flag"]);
    expect(plan[0]!.body).toMatch(/^Discovered while working on #12 \(pull request #14\)\./);
    expect(plan[1]!.body).toContain("It is missing from the README.");
    expect(plan[0]!.body).toContain(discoveredMarker("fl-a3f", plan[0]!.key));
    expect(plan.every((p) => p.labels.length === 0)).toBe(true);
  });

  it("gives the task's coder label with autoLabel, and names only the issue when there is no PR", () => {
    const [one] = planDiscoveredIssues({
      ...base,
      pr: undefined,
      autoLabel: true,
      followUps: ["Refactor x"],
    });
    expect(one!.labels).toEqual(["fleet:claude"]);
    expect(one!.body).toMatch(/^Discovered while working on #12\./);
  });

  it("skips blanks, repeats (whitespace and case aside) and follow-ups already filed", () => {
    const first = planDiscoveredIssues({
      ...base,
      followUps: ["Fix  the cache", "fix the cache ", "  ", "Other"],
    });
    expect(first.map((p) => p.title)).toEqual(["Fix  the cache", "Other"]);
    const again = planDiscoveredIssues({
      ...base,
      followUps: ["Fix the cache", "Other", "New one"],
      existingBodies: first.map((p) => p.body),
    });
    expect(again.map((p) => p.title)).toEqual(["New one"]);
    // Another task's markers do not count.
    const otherTask = planDiscoveredIssues({
      ...base,
      taskId: "fl-b00",
      followUps: ["Other"],
      existingBodies: first.map((p) => p.body),
    });
    expect(otherTask).toHaveLength(1);
  });

  it("finds filed follow-ups by marker and cuts long titles", () => {
    const [p] = planDiscoveredIssues({ ...base, followUps: ["x".repeat(200)] });
    expect(p!.title.length).toBeLessThanOrEqual(80);
    expect(p!.title.endsWith("…")).toBe(true);
    const found = filedDiscoveries("fl-a3f", [
      { number: 20, body: p!.body },
      { number: 21, body: "unrelated" },
      { number: 22, body: null },
    ]);
    expect([...found.entries()]).toEqual([[p!.key, 20]]);
    expect(followUpKey("A  b")).toBe(followUpKey("a b"));
    expect(followUpKey("a b")).not.toBe(followUpKey("a c"));
    expect(followUpTitle("1. Step one.")).toBe("Step one");
  });
});
