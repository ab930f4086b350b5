import { describe, expect, it } from "vitest";
import { isPriority, isTaskState, newTask, TASK_STATES } from "../../src/core/task.ts";

describe("newTask", () => {
  it("starts queued with defaults", () => {
    const t = newTask({
      id: "fl-a3f",
      repo: "o/r",
      issue: 5,
      title: "T",
      coder: "codex",
      model: "m",
      now: "X",
    });
    expect(t).toEqual({
      id: "fl-a3f",
      repo: "o/r",
      issue: 5,
      title: "T",
      coder: "codex",
      model: "m",
      priority: 2,
      state: "queued",
      dependsOn: [],
      createdAt: "X",
      updatedAt: "X",
      queuedAt: "X",
      attempts: 0,
    });
  });

  it("dedupes dependencies and drops a self-dependency", () => {
    const t = newTask({
      id: "a",
      repo: "o/r",
      issue: 5,
      title: "T",
      coder: "c",
      model: "m",
      now: "X",
      dependsOn: [3, 5, 3, 4],
      priority: 0,
      requestedBy: "alice",
    });
    expect(t.dependsOn).toEqual([3, 4]);
    expect(t.priority).toBe(0);
    expect(t.requestedBy).toBe("alice");
  });
});

describe("guards", () => {
  it("isTaskState", () => {
    for (const s of TASK_STATES) expect(isTaskState(s)).toBe(true);
    expect(isTaskState("paused")).toBe(false);
    expect(isTaskState(3)).toBe(false);
  });
  it("isPriority", () => {
    expect([0, 1, 2, 3, 4].every(isPriority)).toBe(true);
    expect(isPriority(5)).toBe(false);
    expect(isPriority(1.5)).toBe(false);
    expect(isPriority("1")).toBe(false);
  });
});
