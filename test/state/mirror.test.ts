import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { liveIssues, parseJsonl } from "../../src/beads/index.ts";
import { newTask } from "../../src/core/task.ts";
import { findBeadForIssue, mirrorIssue } from "../../src/state/mirror.ts";

const FIXTURE = join(import.meta.dirname, "../fixtures/beads/2025-12-01-64ef220/issues.jsonl");
const now = new Date("2026-02-01T10:00:00Z");
const task = (issue: number, id: string) =>
  newTask({
    id,
    repo: "octo/widgets",
    issue,
    title: "t",
    coder: "claude",
    model: "opus",
    now: "2026-02-01T09:00:00Z",
  });
const issue = (n: number, extra: Partial<Parameters<typeof mirrorIssue>[1]["issue"]> = {}) => ({
  number: n,
  title: `Issue ${n}`,
  body: "",
  labels: ["fleet:claude"],
  state: "open" as const,
  ...extra,
});

describe("beads mirror", () => {
  it("adds one bead per fleet issue and keeps every other line byte for byte", async () => {
    const original = await readFile(FIXTURE, "utf8");
    const a = mirrorIssue(original, { repo: "octo/widgets", now, issue: issue(7), task: task(7, "fl-aaaa") });
    expect(a.changed).toBe(true);
    const beforeLines = new Set(original.split("\n"));
    const added = a.beads.split("\n").filter((l) => !beforeLines.has(l));
    expect(added).toHaveLength(1);
    expect(JSON.parse(added[0]!)).toMatchObject({
      id: "fl-aaaa",
      title: "Issue 7",
      external_ref: "gh-7",
      status: "open",
    });
    // Mirroring again changes nothing; a second call never makes a second bead.
    const again = mirrorIssue(a.beads, {
      repo: "octo/widgets",
      now,
      issue: issue(7),
      task: task(7, "fl-aaaa"),
    });
    expect(again.changed).toBe(false);
    expect(liveIssues(parseJsonl(again.beads)).filter((b) => b.external_ref === "gh-7")).toHaveLength(1);
  });

  it("follows title, body, labels and dependencies, then closes the bead when the issue closes", () => {
    let beads = mirrorIssue("", {
      repo: "octo/widgets",
      now,
      issue: issue(3),
      task: task(3, "fl-3333"),
    }).beads;
    beads = mirrorIssue(beads, {
      repo: "octo/widgets",
      now,
      issue: issue(5, {
        title: "Five",
        body: "Depends on #3",
        labels: ["fleet:claude", "bug"],
        subIssues: [],
      }),
      task: { ...task(5, "fl-5555"), priority: 1 },
    }).beads;
    const five = findBeadForIssue(liveIssues(parseJsonl(beads)), 5)!;
    expect(five).toMatchObject({
      title: "Five",
      description: "Depends on #3",
      labels: ["bug", "fleet:claude"],
      priority: 1,
    });
    expect(five.dependencies).toMatchObject([
      { issue_id: "fl-5555", depends_on_id: "fl-3333", type: "blocks" },
    ]);

    const closed = mirrorIssue(beads, {
      repo: "octo/widgets",
      now,
      issue: issue(5, { state: "closed" }),
    }).beads;
    expect(findBeadForIssue(liveIssues(parseJsonl(closed)), 5)).toMatchObject({
      status: "closed",
      close_reason: "issue #5 was closed on GitHub",
    });
    const unlabeled = mirrorIssue(beads, {
      repo: "octo/widgets",
      now,
      issue: issue(3, { labels: [] }),
    }).beads;
    expect(findBeadForIssue(liveIssues(parseJsonl(unlabeled)), 3)).toMatchObject({
      status: "closed",
      close_reason: "fleet label removed from issue #3",
    });
  });

  it("leaves the text alone for an issue that has neither task nor bead", () => {
    expect(mirrorIssue("x\n", { repo: "o/r", now, issue: issue(9) })).toEqual({
      beads: "x\n",
      changed: false,
    });
  });
});
