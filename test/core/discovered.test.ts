import { describe, expect, it } from "vitest";
import {
  discoveredMarker,
  filedDiscoveries,
  followUpCapNote,
  followUpKey,
  followUpsToFile,
  followUpTitle,
  mayQueueDiscovered,
  planDiscoveredIssues,
} from "../../src/core/discovered.ts";

const base = {
  taskId: "fl-a3f",
  issue: 12,
  pr: 14,
  coderLabel: "fleet:claude",
  autoLabel: false,
  maxFollowUps: 5,
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

  it("files at most maxFollowUps per run, counting only distinct follow-ups, and none with 0", () => {
    const many = Array.from({ length: 120 }, (_, i) => `Follow-up number ${i}`);
    const plan = planDiscoveredIssues({ ...base, followUps: ["  ", many[0]!, many[0]!, ...many] });
    expect(plan.map((p) => p.title)).toEqual(many.slice(0, 5));
    expect(followUpsToFile(["  ", many[0]!, many[0]!, ...many], 5)).toEqual({
      file: many.slice(0, 5),
      leftOut: 115,
    });
    expect(planDiscoveredIssues({ ...base, maxFollowUps: 0, followUps: many })).toEqual([]);
    expect(followUpsToFile(many, 0)).toEqual({ file: [], leftOut: 120 });
    // The same run processed again files nothing: the cap is on the run's list, not on what is new.
    const again = planDiscoveredIssues({
      ...base,
      followUps: many,
      existingBodies: plan.map((p) => p.body),
    });
    expect(again).toEqual([]);
  });

  it("says how many follow-ups were left out, and nothing when none were", () => {
    expect(followUpCapNote(followUpsToFile(["a", "b"], 5), 5)).toBeUndefined();
    expect(followUpCapNote(followUpsToFile(["a", "b", "c"], 1), 1)).toBe(
      "Fleet files at most 1 follow-up of a run as an issue (`max_follow_ups`): 2 were left out.",
    );
    expect(followUpCapNote(followUpsToFile(["a", "b", "c"], 2), 2)).toBe(
      "Fleet files at most 2 follow-ups of a run as issues (`max_follow_ups`): 1 was left out.",
    );
    expect(followUpCapNote(followUpsToFile(["a", "b"], 0), 0)).toBe(
      "Fleet files no follow-ups as issues (`max_follow_ups` is 0): 2 were left out.",
    );
  });

  it("bounds a follow-up's issue body, with a note where the rest is", () => {
    const [p] = planDiscoveredIssues({ ...base, followUps: [`Big one\n${"z".repeat(200_000)}`] });
    expect(p!.body.length).toBeLessThan(12_000);
    expect(p!.body).toContain("characters left out");
    expect(p!.body).toContain("`fleet task fl-a3f result`");
    expect(p!.body).toContain(discoveredMarker("fl-a3f", p!.key));
  });

  it("stops a chain: the follow-ups of a task that is itself an agent's work are not labelled, and say why", () => {
    expect(mayQueueDiscovered({ autoLabel: true, taskIsAgentWork: false })).toBe(true);
    expect(mayQueueDiscovered({ autoLabel: true, taskIsAgentWork: true })).toBe(false);
    expect(mayQueueDiscovered({ autoLabel: false, taskIsAgentWork: false })).toBe(false);
    const [first] = planDiscoveredIssues({ ...base, autoLabel: true, followUps: ["Refactor x"] });
    expect(first!.labels).toEqual(["fleet:claude"]);
    const [second] = planDiscoveredIssues({
      ...base,
      autoLabel: true,
      taskIsAgentWork: true,
      followUps: ["Refactor x"],
    });
    expect(second!.labels).toEqual([]);
    expect(second!.body).toContain(
      "Fleet did not queue this one: #12 is itself work an agent wrote (a follow-up or a split Fleet filed), and an agent's follow-ups are queued by themselves one generation deep only.",
    );
    expect(second!.body).toContain("Add the `fleet:claude` label to have an agent work on it.");
    // Without auto_label_discovered nothing is queued anyway: no note.
    const [plain] = planDiscoveredIssues({ ...base, taskIsAgentWork: true, followUps: ["Refactor x"] });
    expect(plain!.body).not.toContain("generation");
  });
});
