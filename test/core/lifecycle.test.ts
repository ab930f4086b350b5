import { describe, expect, it } from "vitest";
import {
  ACTIVE_STATES,
  CANCELLABLE_STATES,
  canTransition,
  IllegalTransitionError,
  isActive,
  isCancellable,
  isLive,
  isTerminal,
  LIVE_STATES,
  RETRYABLE_STATES,
  SLOT_HOLDING_STATES,
  TERMINAL_STATES,
  TRANSITIONS,
  transition,
} from "../../src/core/lifecycle.ts";
import { newTask, TASK_STATES, type Task, type TaskState } from "../../src/core/task.ts";

const T0 = "2025-01-01T00:00:00Z";
const T1 = "2025-01-01T00:05:00Z";

const task = (state: TaskState, extra: Partial<Task> = {}): Task => ({
  ...newTask({
    id: "fl-x",
    repo: "o/r",
    issue: 7,
    title: "Fix it",
    coder: "claude",
    model: "sonnet",
    now: T0,
  }),
  state,
  ...extra,
});

describe("TRANSITIONS", () => {
  it("has a row for every state and only names known states", () => {
    expect(Object.keys(TRANSITIONS).sort()).toEqual([...TASK_STATES].sort());
    for (const targets of Object.values(TRANSITIONS)) {
      for (const t of targets) expect(TASK_STATES).toContain(t);
    }
  });

  it("is frozen", () => {
    expect(Object.isFrozen(TRANSITIONS)).toBe(true);
    expect(Object.isFrozen(TRANSITIONS.queued)).toBe(true);
  });

  it("allows the main path", () => {
    const path: TaskState[] = [
      "queued",
      "blocked",
      "queued",
      "dispatched",
      "planning",
      "awaiting-approval",
      "running",
      "pr-open",
      "done",
    ];
    for (let i = 1; i < path.length; i++) expect(canTransition(path[i - 1]!, path[i]!)).toBe(true);
  });

  it.each([
    ["dispatched", "running"],
    ["planning", "running"],
    ["failed", "queued"],
    ["cancelled", "queued"],
    ["rate-limited", "queued"],
    ["running", "queued"],
    ["pr-open", "running"],
    ["running", "rate-limited"],
  ] as const)("allows %s -> %s", (from, to) => {
    expect(canTransition(from, to)).toBe(true);
  });

  it.each(["dispatched", "planning", "awaiting-approval", "running", "pr-open"] as const)(
    "lets %s be cancelled or fail",
    (from) => {
      expect(canTransition(from, "cancelled")).toBe(true);
      expect(canTransition(from, "failed")).toBe(true);
    },
  );

  it.each([
    ["done", "running"],
    ["done", "queued"],
    ["queued", "running"],
    ["queued", "pr-open"],
    ["blocked", "dispatched"],
    ["awaiting-approval", "pr-open"],
    ["rate-limited", "running"],
    ["queued", "queued"],
    ["failed", "running"],
  ] as const)("forbids %s -> %s", (from, to) => {
    expect(canTransition(from, to)).toBe(false);
  });

  it("done is a dead end", () => {
    for (const s of TASK_STATES) expect(canTransition("done", s)).toBe(false);
  });
});

describe("ACTIVE_STATES / TERMINAL_STATES", () => {
  it("counts only states with a live agent as slot holders", () => {
    expect([...ACTIVE_STATES].sort()).toEqual(["dispatched", "planning", "running"]);
    expect(ACTIVE_STATES.has("awaiting-approval")).toBe(false);
    expect(ACTIVE_STATES.has("pr-open")).toBe(false);
  });

  it("terminal states are done, failed, cancelled", () => {
    expect([...TERMINAL_STATES].sort()).toEqual(["cancelled", "done", "failed"]);
  });
});

describe("transition", () => {
  it("throws IllegalTransitionError naming both states", () => {
    expect(() => transition(task("done"), "running", { now: T1 })).toThrow(
      "cannot move task fl-x from done to running",
    );
    try {
      transition(task("queued"), "pr-open", { now: T1 });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(IllegalTransitionError);
      const err = e as IllegalTransitionError;
      expect(err.from).toBe("queued");
      expect(err.to).toBe("pr-open");
      expect(err.taskId).toBe("fl-x");
      expect(err.message).toContain("blocked, dispatched, cancelled, failed");
    }
  });

  it("says when the state is final", () => {
    expect(() => transition(task("done"), "queued", { now: T1 })).toThrow(/done is final/);
  });

  it("does not mutate its input and stamps updatedAt", () => {
    const before = task("queued");
    const frozen = Object.freeze({ ...before });
    const after = transition(frozen, "dispatched", { now: T1 });
    expect(frozen.state).toBe("queued");
    expect(after.state).toBe("dispatched");
    expect(after.updatedAt).toBe(T1);
    expect(after.createdAt).toBe(T0);
  });

  it("counts a started run on dispatch", () => {
    const t = transition(task("queued", { attempts: 1 }), "dispatched", { now: T1 });
    expect(t.attempts).toBe(2);
    expect(transition(t, "running", { now: T1 }).attempts).toBe(2);
  });

  it("re-entering the queue resets the FIFO key", () => {
    const t = transition(task("failed", { reason: "boom" }), "queued", { now: T1 });
    expect(t.queuedAt).toBe(T1);
    expect(t.reason).toBeUndefined();
  });

  it("an unblocked task keeps its place in the queue", () => {
    const t = transition(task("blocked", { reason: "waits for #3" }), "queued", { now: T1 });
    expect(t.queuedAt).toBe(T0);
  });

  it("keeps the reason only for states it explains", () => {
    expect(transition(task("running"), "failed", { now: T1, reason: "timeout" }).reason).toBe("timeout");
    expect(transition(task("queued"), "blocked", { now: T1, reason: "waits for #3" }).reason).toBe(
      "waits for #3",
    );
    expect(transition(task("planning"), "running", { now: T1, reason: "ignored" }).reason).toBeUndefined();
  });

  it("drops the lease when leaving slot-holding states", () => {
    const lease = { holder: "w1", slot: 1, acquiredAt: T0, heartbeatAt: T0, expiresAt: T1 };
    expect(transition(task("dispatched", { lease }), "running", { now: T1 }).lease).toEqual(lease);
    expect(transition(task("running", { lease }), "pr-open", { now: T1 }).lease).toBeUndefined();
    expect(transition(task("planning", { lease }), "awaiting-approval", { now: T1 }).lease).toBeUndefined();
  });

  it("records the reset time while rate-limited and clears it afterwards", () => {
    const limited = transition(task("running"), "rate-limited", {
      now: T1,
      reason: "429 from provider",
      resetAt: "2025-01-01T01:00:00Z",
    });
    expect(limited.resetAt).toBe("2025-01-01T01:00:00Z");
    expect(limited.reason).toBe("429 from provider");
    const back = transition(limited, "queued", { now: "2025-01-01T01:00:01Z" });
    expect(back.resetAt).toBeUndefined();
    expect(back.reason).toBeUndefined();
  });

  it("keeps a retry's not-before time on the queued task, and drops it when the task is dispatched", () => {
    const retry = transition(task("running"), "queued", {
      now: T1,
      reason: "attempt 1 ended (error); retrying after 01:01:00 UTC",
      resetAt: "2025-01-01T01:01:00Z",
    });
    expect(retry.resetAt).toBe("2025-01-01T01:01:00Z");
    expect(transition(retry, "dispatched", { now: "2025-01-01T01:01:01Z" }).resetAt).toBeUndefined();
  });
});

describe("the state lists", () => {
  it("are each written once and agree with each other", () => {
    expect([...ACTIVE_STATES]).toEqual([...SLOT_HOLDING_STATES]);
    expect(LIVE_STATES).toEqual(TASK_STATES.filter((s) => !TERMINAL_STATES.has(s)));
    expect(CANCELLABLE_STATES).toEqual([
      "queued",
      "blocked",
      "dispatched",
      "planning",
      "awaiting-approval",
      "running",
      "waiting",
      "rate-limited",
    ]);
    expect(LIVE_STATES).toEqual([...CANCELLABLE_STATES.slice(0, 6), "pr-open", "waiting", "rate-limited"]);
    expect(RETRYABLE_STATES).toEqual(["failed", "cancelled", "rate-limited"]);
  });

  it("only list states the table lets a task leave the way they are used for", () => {
    for (const s of LIVE_STATES) expect(canTransition(s, "cancelled"), s).toBe(true);
    for (const s of RETRYABLE_STATES) expect(canTransition(s, "queued"), s).toBe(true);
    for (const s of SLOT_HOLDING_STATES) expect(canTransition(s, "queued"), s).toBe(true);
  });

  it("answer the predicates", () => {
    expect(isActive("running")).toBe(true);
    expect(isActive("awaiting-approval")).toBe(false);
    expect(isTerminal("done")).toBe(true);
    expect(isLive("pr-open")).toBe(true);
    expect(isLive("cancelled")).toBe(false);
    expect(isCancellable("rate-limited")).toBe(true);
    expect(isCancellable("pr-open")).toBe(false);
  });
});
