import { describe, expect, it } from "vitest";
import { renderPlanMermaid } from "../../src/render/split.ts";
import { extractPlanJson, validateSplitPlan } from "../../src/split/plan.ts";
import { isSplitRun } from "../../src/split/split-run.ts";

const CODERS = ["claude", "codex"];
const task = (key: string, dependsOn: string[] = [], extra: Record<string, unknown> = {}) => ({
  key,
  title: `Task ${key}`,
  body: `Do ${key}.`,
  dependsOn,
  ...extra,
});

describe("validateSplitPlan", () => {
  it("accepts a valid plan and orders dependencies first", () => {
    const r = validateSplitPlan(
      { tasks: [task("api", ["db"]), task("ui", ["api"]), task("db", [], { coder: "codex", priority: 1 })] },
      CODERS,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.order.map((t) => t.key)).toEqual(["db", "api", "ui"]);
    expect(r.plan.tasks[2]!.coder).toBe("codex");
  });

  it("reports every problem with its path", () => {
    const r = validateSplitPlan(
      {
        tasks: [task("a"), task("a"), task("c", ["db", "c"], { coder: "gpt" })],
      },
      CODERS,
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems).toEqual([
      { path: "tasks[1].key", message: 'duplicate key "a" (also tasks[0])' },
      { path: "tasks[2].coder", message: 'unknown coder "gpt" (known: claude, codex)' },
      { path: "tasks[2].dependsOn[1]", message: "a task cannot depend on itself" },
      { path: "tasks[2].dependsOn[0]", message: 'unknown key "db"' },
    ]);
  });

  it("reports shape problems from the schema with their paths", () => {
    const r = validateSplitPlan({ tasks: [{ key: "x", title: "", dependsOn: "y" }] }, CODERS);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.path).sort()).toEqual(["tasks[0].dependsOn", "tasks[0].title"]);
    expect(validateSplitPlan({ tasks: [] }, CODERS).ok).toBe(false);
    expect(validateSplitPlan("nope", CODERS).ok).toBe(false);
  });

  it("rejects cycles and names them", () => {
    const r = validateSplitPlan({ tasks: [task("a", ["c"]), task("b", ["a"]), task("c", ["b"])] }, CODERS);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems).toEqual([
      { path: "tasks[0].dependsOn", message: "dependency cycle: a -> c -> b -> a" },
    ]);
  });

  it("rejects a priority outside 0..4", () => {
    const r = validateSplitPlan({ tasks: [task("a", [], { priority: 7 })] }, CODERS);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems[0]!.path).toBe("tasks[0].priority");
  });
});

describe("renderPlanMermaid", () => {
  it("draws one node per task and an edge from each dependency", () => {
    const r = validateSplitPlan(
      { tasks: [task("db"), task("api", ["db"]), task("ui", ["api", "db"], { title: 'Say "hi" <b>' })] },
      CODERS,
    );
    if (!r.ok) throw new Error("plan should be valid");
    expect(
      renderPlanMermaid(
        r.plan,
        new Map([
          ["db", 4],
          ["api", 5],
          ["ui", 6],
        ]),
      ),
    ).toBe(
      [
        "```mermaid",
        "flowchart TD",
        '  t0["#4 Task db"]',
        '  t1["#5 Task api"]',
        '  t2["#6 Say  hi  b"]',
        "  t0 --> t1",
        "  t1 --> t2",
        "  t0 --> t2",
        "```",
      ].join("\n"),
    );
    expect(renderPlanMermaid(r.plan)).toContain('t0["Task db"]');
  });
});

describe("extractPlanJson", () => {
  it("prefers RESULT.json, else the last json block of the plan text", () => {
    expect(extractPlanJson({ tasks: [] }, "```json\n{}\n```")).toEqual({ tasks: [] });
    expect(
      extractPlanJson(undefined, 'Plan:\n```json\n{"a":1}\n```\nthen\n```json\n{"tasks":[]}\n```'),
    ).toEqual({
      tasks: [],
    });
    expect(extractPlanJson(undefined, '{"tasks":[]}')).toEqual({ tasks: [] });
    expect(extractPlanJson(undefined, "no json here")).toBeUndefined();
  });
});

describe("isSplitRun", () => {
  it("is the split coder's run when no coder label asks for a normal run", () => {
    expect(isSplitRun(["fleet:split"], "claude", "claude")).toBe(true);
    expect(isSplitRun([{ name: "fleet:split:codex" }], "codex", "claude")).toBe(true);
    expect(isSplitRun(["fleet:split:codex"], "claude", "claude")).toBe(false);
    expect(isSplitRun(["fleet:split", "fleet:claude"], "claude", "claude")).toBe(false);
    expect(isSplitRun(["fleet:claude"], "claude", "claude")).toBe(false);
  });
});
