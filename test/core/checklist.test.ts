// The agent's to-do list as each coder's tool calls change it, and how the tracking comment shows it.
import { describe, expect, it } from "vitest";
import { CHECKLIST_MAX_ITEMS, type ChecklistItem, checklistAfter } from "../../src/core/checklist.ts";
import { renderChecklist } from "../../src/render/checklist.ts";
import { composeTrackingComment, trackingSectionsOf } from "../../src/render/tracking-comment.ts";

const play = (calls: Array<[string, unknown]>): ChecklistItem[] =>
  calls.reduce<ChecklistItem[]>((list, [tool, input]) => checklistAfter(list, tool, input) ?? list, []);

describe("the agent's checklist", () => {
  it("Claude: TaskCreate numbers tasks from 1, TaskUpdate moves and renames them, deleted ones go", () => {
    const list = play([
      ["TaskCreate", { subject: "Read the parser", description: "…", activeForm: "Reading" }],
      ["TaskCreate", { subject: "Fix the off-by-one" }],
      ["TaskCreate", { subject: "Scratch" }],
      ["TaskUpdate", { taskId: "1", status: "completed" }],
      ["TaskUpdate", { taskId: "2", status: "in_progress", subject: "Fix the off-by-one in split()" }],
      ["TaskUpdate", { taskId: "3", status: "deleted" }],
      ["Write", { file_path: "a.ts" }],
    ]);
    expect(list).toEqual([
      { id: "1", text: "Read the parser", status: "completed" },
      { id: "2", text: "Fix the off-by-one in split()", status: "in_progress" },
    ]);
    expect(checklistAfter(list, "TaskUpdate", { taskId: "9", status: "completed" })).toBeUndefined();
    expect(checklistAfter(list, "Bash", { command: "ls" })).toBeUndefined();
  });

  it("whole lists (TodoWrite, opencode's todowrite, Gemini's write_todos, Codex's todo_list) replace it", () => {
    expect(
      play([
        [
          "TodoWrite",
          {
            todos: [
              { content: "a", status: "completed" },
              { content: "b", status: "pending" },
            ],
          },
        ],
      ]),
    ).toEqual([
      { id: "1", text: "a", status: "completed" },
      { id: "2", text: "b", status: "pending" },
    ]);
    expect(play([["todowrite", { todos: [{ id: "x", content: "c", status: "in_progress" }] }]])).toEqual([
      { id: "x", text: "c", status: "in_progress" },
    ]);
    expect(
      play([
        [
          "write_todos",
          {
            todos: [
              { description: "d", status: "cancelled" },
              { description: "e", status: "completed" },
            ],
          },
        ],
      ]),
    ).toEqual([{ id: "2", text: "e", status: "completed" }]);
    expect(
      play([
        [
          "todo_list",
          {
            items: [
              { text: "f", completed: true },
              { text: "g", completed: false },
            ],
          },
        ],
      ]),
    ).toEqual([
      { id: "1", text: "f", status: "completed" },
      { id: "2", text: "g", status: "pending" },
    ]);
  });

  it("is bounded: items and their text are cut, blank ones dropped", () => {
    const many = play(
      Array.from({ length: 50 }, (_, i) => ["TaskCreate", { subject: `step ${i}` }] as [string, unknown]),
    );
    expect(many).toHaveLength(CHECKLIST_MAX_ITEMS);
    const long = play([
      ["TaskCreate", { subject: "x".repeat(500) }],
      ["TaskCreate", { subject: "  " }],
    ]);
    expect(long).toHaveLength(1);
    expect(long[0]!.text.length).toBeLessThanOrEqual(160);
  });

  it("renders as a task list; the agent's text cannot open a comment, a box or a mention", () => {
    const text = renderChecklist([
      { id: "1", text: "Read", status: "completed" },
      { id: "2", text: "Ping @octocat <!-- x --> [x] done", status: "in_progress" },
      { id: "3", text: "Docs", status: "pending" },
    ]);
    expect(text.split("\n").slice(0, 3)).toEqual(["**Progress** (1 of 3 done)", "", "- [x] Read"]);
    expect(text).not.toContain("<!--");
    expect(text).not.toMatch(/(^|[^`])@octocat/);
    expect(text).toContain("\\[x\\] done** (in progress)");
    expect(text.split("\n").at(-1)).toBe("- [ ] Docs");
    expect(renderChecklist([])).toBe("");
  });

  it("is a section of the tracking comment of its own, between the plan and the report", () => {
    const body = composeTrackingComment("state", { plan: "P", progress: "C", report: "R" });
    expect(body.indexOf("C")).toBeGreaterThan(body.indexOf("P"));
    expect(body.indexOf("R")).toBeGreaterThan(body.indexOf("C"));
    expect(trackingSectionsOf(body)).toEqual({ plan: "P", progress: "C", report: "R" });
  });
});
