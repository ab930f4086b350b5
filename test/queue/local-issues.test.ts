import { describe, expect, it } from "vitest";
import { parseJsonl } from "../../src/beads/index.ts";
import { emptyStateDoc } from "../../src/core/state-doc.ts";
import {
  closeLocalIssue,
  createLocalIssue,
  editLocalIssue,
  localIssuesOf,
  localRepositoryOf,
  mergeLocalTask,
} from "../../src/queue/local-issues.ts";

const NEW = {
  repo: "local/app",
  title: "Add a greeting",
  body: "Print hello.",
  labels: ["fleet:claude"],
  repository: { path: "/src/app", remote: "git@example.com:me/app.git" },
  sides: [{ coder: "claude", model: "sonnet" }],
  priority: 2 as const,
  dependsOn: [],
  requestedBy: "mona",
  now: "2026-12-01T10:00:00.000Z",
};

describe("local issues: the named transitions local mode's fleet bd runs", () => {
  it("create numbers the issue above every task, queues its task and mirrors it as a bead", () => {
    const first = createLocalIssue(emptyStateDoc(), "", NEW);
    expect(first.issue).toBe(1);
    expect(first.task.state).toBe("queued");
    expect(localIssuesOf(first.doc)["1"]).toMatchObject({ title: "Add a greeting", state: "open" });
    const bead = parseJsonl(first.beads)
      .records.map((r) => r.issue)
      .find((b) => b.title === "Add a greeting");
    expect(bead?.description).toContain("Print hello.");
    const second = createLocalIssue(first.doc, first.beads, { ...NEW, title: "Second" });
    expect(second.issue).toBe(2);
    expect(Object.keys(second.doc.tasks)).toHaveLength(2);
  });

  it("numbers issues above the local pull requests too: one series, as on GitHub", () => {
    const first = createLocalIssue(emptyStateDoc(), "", NEW);
    // The first task's branch became pull request #2.
    const withPr = {
      ...first.doc,
      tasks: { [first.task.id]: { ...first.task, state: "pr-open" as const, pr: 2 } },
    };
    expect(createLocalIssue(withPr, first.beads, NEW).issue).toBe(3);
    // A pull request not yet recorded on its task is named by the caller.
    expect(createLocalIssue(first.doc, first.beads, { ...NEW, numberAbove: 7 }).issue).toBe(8);
  });

  it("edit changes the task and the issue together; a task that is gone is left alone", () => {
    const made = createLocalIssue(emptyStateDoc(), "", NEW);
    const edited = editLocalIssue(made.doc, made.beads, made.task.id, {
      repo: NEW.repo,
      now: "2026-12-01T11:00:00.000Z",
      title: "Add a friendly greeting",
      priority: 0,
      body: (t) => `Print hello.\n\nDepends on #${t.issue + 5}`,
    });
    expect(edited?.doc.tasks[made.task.id]).toMatchObject({ title: "Add a friendly greeting", priority: 0 });
    expect(localIssuesOf(edited!.doc)["1"]?.body).toBe("Print hello.\n\nDepends on #6");
    expect(editLocalIssue(made.doc, made.beads, "bd-gone", { repo: NEW.repo, now: NEW.now })).toBeNull();
  });

  it("close cancels a task without a branch, finishes one with its branch pushed, and closes the issue", () => {
    const made = createLocalIssue(emptyStateDoc(), "", NEW);
    const closed = closeLocalIssue(made.doc, made.beads, made.task.id, {
      repo: NEW.repo,
      now: "2026-12-01T12:00:00.000Z",
      reason: "not needed",
    });
    expect(closed?.doc.tasks[made.task.id]?.state).toBe("cancelled");
    expect(localIssuesOf(closed!.doc)["1"]?.state).toBe("closed");
    const bead = parseJsonl(closed!.beads)
      .records.map((r) => r.issue)
      .find((b) => b.title === "Add a greeting");
    expect(bead?.status).toBe("closed");

    const open = { ...made.doc, tasks: { [made.task.id]: { ...made.task, state: "pr-open" as const } } };
    const done = closeLocalIssue(open, made.beads, made.task.id, {
      repo: NEW.repo,
      now: NEW.now,
      reason: "merged",
    });
    expect(done?.doc.tasks[made.task.id]?.state).toBe("done");
  });

  it("records the repository the issue's tasks run in", () => {
    const made = createLocalIssue(emptyStateDoc(), "", NEW);
    expect(localRepositoryOf(made.doc, made.task)).toEqual(NEW.repository);
    expect(localIssuesOf(made.doc)["1"]?.repository).toEqual(NEW.repository);
  });

  it("create with several sides queues one task per side of the A/B run, one issue", () => {
    const sides = [
      { coder: "claude", model: "opus" },
      { coder: "codex", model: "o4-mini" },
    ];
    const made = createLocalIssue(emptyStateDoc(), "", { ...NEW, sides });
    expect(made.tasks.map((t) => `${t.coder}:${t.model}`)).toEqual(["claude:opus", "codex:o4-mini"]);
    expect(new Set(made.tasks.map((t) => t.issue))).toEqual(new Set([1]));
    expect(Object.keys(localIssuesOf(made.doc))).toEqual(["1"]);
    const beads = parseJsonl(made.beads).records.map((r) => r.issue.id);
    for (const t of made.tasks) expect(beads).toContain(t.id);
  });

  it("merge finishes a task with an open branch and closes its issue unless another side is live", () => {
    const made = createLocalIssue(emptyStateDoc(), "", {
      ...NEW,
      sides: [
        { coder: "claude", model: "opus" },
        { coder: "codex", model: "o4-mini" },
      ],
    });
    const [a, b] = made.tasks as [typeof made.task, typeof made.task];
    const open = {
      ...made.doc,
      tasks: {
        [a.id]: { ...a, state: "pr-open" as const, branch: "fleet/1-x-claude-opus" },
        [b.id]: { ...b, state: "pr-open" as const, branch: "fleet/1-x-codex-o4-mini" },
      },
    };
    const merge = { repo: NEW.repo, now: "2026-12-01T12:00:00.000Z", how: "fast-forward" };
    expect(mergeLocalTask(made.doc, made.beads, a.id, merge)).toBeNull();
    const first = mergeLocalTask(open, made.beads, a.id, merge)!;
    expect(first.doc.tasks[a.id]?.state).toBe("done");
    expect(localIssuesOf(first.doc)["1"]?.state).toBe("open");
    expect(first.message).toContain("merge fleet/1-x-claude-opus");
    const second = mergeLocalTask(first.doc, first.beads, b.id, merge)!;
    expect(localIssuesOf(second.doc)["1"]?.state).toBe("closed");
  });
});
