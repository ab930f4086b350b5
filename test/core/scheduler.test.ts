import { describe, expect, it } from "vitest";
import { defaultFleetConfig, type FleetConfig } from "../../src/core/config.ts";
import {
  doneIssuesOf,
  MAX_RETRY_BACKOFF_SECONDS,
  nextWakeAt,
  queuePosition,
  retryNotBefore,
  retryReason,
  type SchedulerDecision,
  scheduleNext,
  wakeDue,
} from "../../src/core/scheduler.ts";
import type { Task, TaskState } from "../../src/core/task.ts";

const NOW = "2025-03-01T12:00:00Z";
const at = (minutes: number): string => new Date(Date.parse(NOW) + minutes * 60_000).toISOString();

let nextIssue = 1;
const task = (extra: Partial<Task> & { state?: TaskState } = {}): Task => {
  const issue = extra.issue ?? nextIssue++;
  return {
    id: `fl-${issue}`,
    repo: "o/r",
    issue,
    title: `Task ${issue}`,
    coder: "claude",
    model: "sonnet",
    priority: 2,
    state: "queued",
    dependsOn: [],
    createdAt: at(-60),
    updatedAt: at(-60),
    queuedAt: at(-60),
    attempts: 0,
    ...extra,
  };
};

const config = (patch: Partial<FleetConfig> = {}): FleetConfig => ({ ...defaultFleetConfig(), ...patch });
const run = (tasks: Task[], extra: Partial<Parameters<typeof scheduleNext>[0]> = {}): SchedulerDecision[] =>
  scheduleNext({ tasks, config: config(), now: NOW, ...extra });
const dispatches = (d: SchedulerDecision[]) =>
  d.filter((x) => x.kind === "dispatch").map((x) => (x.kind === "dispatch" ? [x.taskId, x.slot] : []));
const lease = (slot: number, expiresInMinutes: number) => ({
  holder: "w",
  slot,
  acquiredAt: at(-10),
  heartbeatAt: at(-1),
  expiresAt: at(expiresInMinutes),
});

describe("scheduleNext", () => {
  it("does nothing with no tasks", () => {
    expect(run([])).toEqual([]);
  });

  it("fills up to max_concurrent slots, numbered from 1", () => {
    const tasks = [1, 2, 3, 4, 5].map((issue) => task({ issue, queuedAt: at(-issue) }));
    // FIFO: the oldest (issue 5, queued 5 minutes ago) first.
    expect(dispatches(run(tasks))).toEqual([
      ["fl-5", 1],
      ["fl-4", 2],
      ["fl-3", 3],
    ]);
  });

  it("puts priority before age and breaks ties by issue number", () => {
    const tasks = [
      task({ issue: 10, priority: 3, queuedAt: at(-100) }),
      task({ issue: 11, priority: 0, queuedAt: at(-1) }),
      task({ issue: 13, priority: 2, queuedAt: at(-5) }),
      task({ issue: 12, priority: 2, queuedAt: at(-5) }),
    ];
    expect(dispatches(run(tasks)).map((d) => d[0])).toEqual(["fl-11", "fl-12", "fl-13"]);
  });

  it("compares times as instants, not strings", () => {
    const tasks = [
      task({ issue: 1, queuedAt: "2025-03-01T11:00:00+02:00" }), // 09:00Z: older
      task({ issue: 2, queuedAt: "2025-03-01T10:00:00Z" }),
    ];
    expect(dispatches(run(tasks, { config: config({ max_concurrent: 1 }) }))).toEqual([["fl-1", 1]]);
  });

  it("never over-grants: slot holders count, including leaseless dispatched tasks", () => {
    const tasks = [
      task({ state: "running", lease: lease(2, 5) }),
      task({ state: "dispatched" }),
      task({ state: "awaiting-approval" }),
      task({ state: "pr-open" }),
      task({ issue: 50 }),
      task({ issue: 51 }),
    ];
    // One slot left: 2 is leased, the leaseless dispatched task takes the lowest free number (1).
    expect(dispatches(run(tasks))).toEqual([["fl-50", 3]]);
    expect(dispatches(run([...tasks, task({ state: "planning", lease: lease(3, 5) })]))).toEqual([]);
  });

  it("grants nothing when holders exceed a lowered cap", () => {
    const tasks = [
      task({ state: "running", lease: lease(1, 5) }),
      task({ state: "running", lease: lease(7, 5) }),
      task(),
    ];
    expect(run(tasks, { config: config({ max_concurrent: 2 }) })).toEqual([]);
  });

  it("frees the slot of an expired lease and reuses its number", () => {
    const tasks = [
      task({ issue: 1, state: "running", lease: lease(1, -1) }),
      task({ issue: 2, state: "running", lease: lease(2, 5) }),
      task({ issue: 3, state: "running", lease: lease(3, 0) }),
      task({ issue: 4 }),
    ];
    expect(run(tasks)).toEqual([
      { kind: "expire-lease", taskId: "fl-1" },
      { kind: "expire-lease", taskId: "fl-3" },
      { kind: "dispatch", taskId: "fl-4", slot: 1 },
    ]);
  });

  it("respects per-coder caps without stalling other coders", () => {
    const cfg = config();
    cfg.coders = { ...cfg.coders, claude: { ...cfg.coders.claude!, max_concurrent: 1 } };
    const tasks = [
      task({ issue: 1, state: "running", coder: "claude" }),
      task({ issue: 2, coder: "claude", queuedAt: at(-30) }),
      task({ issue: 3, coder: "codex", queuedAt: at(-20) }),
      task({ issue: 4, coder: "claude", queuedAt: at(-10) }),
      task({ issue: 5, coder: "agy", queuedAt: at(-5) }),
    ];
    expect(dispatches(run(tasks, { config: cfg })).map((d) => d[0])).toEqual(["fl-3", "fl-5"]);
  });

  it("holds tasks of disabled or unknown coders and moves on", () => {
    const cfg = config();
    cfg.coders = { ...cfg.coders, codex: { ...cfg.coders.codex!, enabled: false } };
    const tasks = [
      task({ issue: 1, coder: "codex", queuedAt: at(-3) }),
      task({ issue: 2, coder: "ghost", queuedAt: at(-2) }),
      task({ issue: 3, queuedAt: at(-1) }),
    ];
    expect(run(tasks, { config: cfg })).toEqual([
      { kind: "hold", taskId: "fl-1", reason: 'coder "codex" is disabled in the config' },
      { kind: "hold", taskId: "fl-2", reason: 'coder "ghost" is not configured' },
      { kind: "dispatch", taskId: "fl-3", slot: 1 },
    ]);
  });

  it("asks readiness and skips tasks it refuses", () => {
    const tasks = [task({ issue: 1, queuedAt: at(-2) }), task({ issue: 2, queuedAt: at(-1) })];
    const seen: string[] = [];
    const d = run(tasks, {
      config: config({ max_concurrent: 1 }),
      readiness: (t) => {
        seen.push(t.id);
        return t.issue === 1 ? { ready: false, reason: "daily budget spent" } : { ready: true };
      },
    });
    expect(d).toEqual([
      { kind: "hold", taskId: "fl-1", reason: "daily budget spent" },
      { kind: "dispatch", taskId: "fl-2", slot: 1 },
    ]);
    expect(seen).toEqual(["fl-1", "fl-2"]);
  });

  describe("dependencies", () => {
    it("blocks a task whose dependencies are open, listing them sorted", () => {
      const tasks = [task({ issue: 5, dependsOn: [9, 7, 9] }), task({ issue: 7, state: "running" })];
      expect(run(tasks)).toEqual([{ kind: "block", taskId: "fl-5", blockedBy: [7, 9] }]);
    });

    it("counts a done fleet task or a closed issue as satisfied", () => {
      const tasks = [
        task({ issue: 5, dependsOn: [7, 8] }),
        task({ issue: 7, state: "done" }),
        task({ issue: 6, dependsOn: [8] }),
      ];
      expect(dispatches(run(tasks, { closedIssues: new Set([8]) })).map((d) => d[0])).toEqual([
        "fl-5",
        "fl-6",
      ]);
      expect(run(tasks)).toContainEqual({ kind: "block", taskId: "fl-5", blockedBy: [8] });
    });

    it("a non-fleet issue that is not closed blocks", () => {
      expect(run([task({ issue: 5, dependsOn: [100] })])).toEqual([
        { kind: "block", taskId: "fl-5", blockedBy: [100] },
      ]);
    });

    it("a failed dependency keeps the dependant blocked", () => {
      const tasks = [task({ issue: 5, dependsOn: [7] }), task({ issue: 7, state: "failed" })];
      expect(run(tasks)).toEqual([{ kind: "block", taskId: "fl-5", blockedBy: [7] }]);
    });

    it("A/B runs: one done task for the issue satisfies it", () => {
      const tasks = [
        task({ id: "a", issue: 7, state: "done" }),
        task({ id: "b", issue: 7, state: "cancelled" }),
        task({ issue: 5, dependsOn: [7] }),
      ];
      expect(dispatches(run(tasks))).toEqual([["fl-5", 1]]);
    });

    it("an epic counts as done once its split is done and every one of its sub-issues is", () => {
      const split = task({ id: "split", issue: 7, state: "done" });
      const dependant = task({ issue: 5, dependsOn: [7] });
      const sub = (issue: number, state: TaskState) => task({ id: `sub-${issue}`, issue, state, epic: 7 });
      expect(run([split, sub(70, "done"), sub(71, "pr-open"), dependant])).toEqual([
        { kind: "block", taskId: "fl-5", blockedBy: [7] },
      ]);
      expect(dispatches(run([split, sub(70, "done"), sub(71, "done"), dependant]))).toEqual([["fl-5", 1]]);
      // A sub-issue split in turn: its own sub-issues count too.
      const nested = [split, sub(70, "done"), task({ id: "sub-80", issue: 80, state: "queued", epic: 70 })];
      expect([...doneIssuesOf(nested)].sort()).toEqual([]);
      expect([...doneIssuesOf([split, sub(70, "done")])].sort()).toEqual([7, 70]);
    });

    it("unblocks and dispatches in the same pass, keeping the original FIFO place", () => {
      const tasks = [
        task({ issue: 1, queuedAt: at(-5) }),
        task({ issue: 2, state: "blocked", dependsOn: [9], queuedAt: at(-50) }),
        task({ issue: 9, state: "done" }),
      ];
      expect(run(tasks, { config: config({ max_concurrent: 1 }) })).toEqual([
        { kind: "unblock", taskId: "fl-2" },
        { kind: "dispatch", taskId: "fl-2", slot: 1 },
      ]);
    });

    it("leaves a still-blocked task alone and ignores self-dependencies", () => {
      expect(run([task({ issue: 2, state: "blocked", dependsOn: [9] })])).toEqual([]);
      expect(dispatches(run([task({ issue: 3, dependsOn: [3] })]))).toEqual([["fl-3", 1]]);
    });

    it("a dependency cycle stays blocked instead of looping", () => {
      const tasks = [task({ issue: 1, dependsOn: [2] }), task({ issue: 2, dependsOn: [1] })];
      expect(run(tasks)).toEqual([
        { kind: "block", taskId: "fl-1", blockedBy: [2] },
        { kind: "block", taskId: "fl-2", blockedBy: [1] },
      ]);
    });
  });

  describe("rate limits", () => {
    it("requeues after resetAt and dispatches at the back of the queue", () => {
      const tasks = [
        task({ issue: 1, state: "rate-limited", resetAt: at(-1), queuedAt: at(-100) }),
        task({ issue: 2, state: "rate-limited", resetAt: at(5) }),
        task({ issue: 3, queuedAt: at(-2) }),
      ];
      expect(run(tasks, { config: config({ max_concurrent: 1 }) })).toEqual([
        { kind: "requeue-rate-limited", taskId: "fl-1" },
        { kind: "dispatch", taskId: "fl-3", slot: 1 },
      ]);
    });

    it("without a reset time waits retries.backoff_seconds from the last update", () => {
      const early = task({ issue: 1, state: "rate-limited", updatedAt: at(-0.5) });
      const late = task({ issue: 2, state: "rate-limited", updatedAt: at(-2) });
      expect(run([early, late])).toEqual([
        { kind: "requeue-rate-limited", taskId: "fl-2" },
        { kind: "dispatch", taskId: "fl-2", slot: 1 },
      ]);
    });
  });

  describe("retry backoff", () => {
    it("keeps a backed-off retry waiting in its place until its time, then dispatches it", () => {
      const retry = task({ issue: 1, resetAt: at(2), queuedAt: at(-100) });
      const other = task({ issue: 2, queuedAt: at(-1) });
      // Slot free, but the retry's time has not come: the next task runs.
      expect(dispatches(run([retry, other], { config: config({ max_concurrent: 1 }) }))).toEqual([
        ["fl-2", 1],
      ]);
      // At its time it is first again (FIFO by its original place).
      expect(dispatches(run([retry, other], { config: config({ max_concurrent: 1 }), now: at(2) }))).toEqual([
        ["fl-1", 1],
      ]);
    });

    it("starts a task again only once its previous run has stopped (or that run's lease ran out)", () => {
      const again = task({ issue: 1, stopping: { holder: "local:w:1", until: at(3) } });
      expect(run([again])).toEqual([]);
      expect(nextWakeAt([again], config(), NOW)).toBe(at(3));
      expect(wakeDue([again], config(), NOW)).toBe(false);
      expect(wakeDue([again], config(), at(3))).toBe(true);
      expect(dispatches(run([again], { now: at(3) }))).toEqual([["fl-1", 1]]);
    });

    it("doubles the wait per failed attempt, up to the cap, and none when backoff is 0", () => {
      expect(retryNotBefore(NOW, 1, 60)).toBe(at(1));
      expect(retryNotBefore(NOW, 2, 60)).toBe(at(2));
      expect(retryNotBefore(NOW, 3, 60)).toBe(at(4));
      expect(retryNotBefore(NOW, 50, 60)).toBe(at(MAX_RETRY_BACKOFF_SECONDS / 60));
      expect(retryNotBefore(NOW, 1, 0)).toBeUndefined();
      expect(retryReason("attempt 1 ended (error)", at(1))).toBe(
        "attempt 1 ended (error); retrying after 12:01:00 UTC",
      );
      expect(retryReason("attempt 1 ended (error)", undefined)).toBe("attempt 1 ended (error); retrying");
    });

    it("wakes at the earliest rate-limit reset, retry time or lease expiry, and never for the past", () => {
      const tasks = [
        task({ issue: 1, state: "rate-limited", resetAt: at(30) }),
        task({ issue: 2, resetAt: at(10) }),
        task({ issue: 3, state: "running", lease: lease(1, 20) }),
        task({ issue: 4, resetAt: at(-5) }),
        task({ issue: 5, state: "done" }),
      ];
      expect(nextWakeAt(tasks, config(), NOW)).toBe(at(10));
      expect(nextWakeAt(tasks.slice(2), config(), NOW)).toBe(at(20));
      // No reset time: the backoff from its last update.
      expect(nextWakeAt([task({ state: "rate-limited", updatedAt: NOW })], config(), NOW)).toBe(at(1));
      expect(nextWakeAt([task({ state: "queued" }), task({ state: "done" })], config(), NOW)).toBeUndefined();
    });

    it("says a poller is due for a pass only when a rate limit or a backoff with a free slot ran out", () => {
      const cap = config({ max_concurrent: 1 });
      expect(wakeDue([task({ state: "rate-limited", resetAt: at(1) })], cap, NOW)).toBe(false);
      expect(wakeDue([task({ state: "rate-limited", resetAt: at(-1) })], cap, NOW)).toBe(true);
      // No reset time: the backoff from its last update.
      expect(wakeDue([task({ state: "rate-limited", updatedAt: at(-2) })], cap, NOW)).toBe(true);
      expect(wakeDue([task({ resetAt: at(-1) })], cap, NOW)).toBe(true);
      // A retry whose time came while every slot is busy waits for the slot's own event.
      const busy = task({ state: "running", lease: lease(1, 20) });
      expect(wakeDue([task({ resetAt: at(-1) }), busy], cap, NOW)).toBe(false);
      expect(wakeDue([task(), task({ state: "done" })], cap, NOW)).toBe(false);
    });
  });

  it("ignores terminal and parked states", () => {
    const states: TaskState[] = ["done", "failed", "cancelled", "pr-open", "awaiting-approval"];
    expect(run(states.map((state) => task({ state })))).toEqual([]);
  });

  it("rejects an invalid clock value", () => {
    expect(() => run([], { now: "yesterday" })).toThrow('"now" is not an RFC3339 time: yesterday');
  });

  it("scales to many tasks and edges with the same rules", () => {
    const many: Task[] = [];
    for (let i = 1; i <= 5000; i++) {
      many.push(
        task({ issue: i, priority: (i % 5) as Task["priority"], dependsOn: i > 2 ? [i - 1, i - 2] : [] }),
      );
    }
    const d = run(many, { config: config({ max_concurrent: 10 }) });
    // Only issues 1 and 2 have no dependencies; everyone else is blocked by open predecessors.
    expect(dispatches(d).map((x) => x[0])).toEqual(["fl-1", "fl-2"]);
    expect(d.filter((x) => x.kind === "block")).toHaveLength(4998);
  });
});

describe("queuePosition", () => {
  it("reports place, queue length and slot use", () => {
    const tasks = [
      task({ issue: 1, state: "running" }),
      task({ issue: 2, state: "running" }),
      task({ issue: 3, state: "planning" }),
      task({ issue: 4, queuedAt: at(-3) }),
      task({ issue: 5, queuedAt: at(-2), priority: 1 }),
      task({ issue: 6, queuedAt: at(-1) }),
      task({ issue: 7, state: "blocked" }),
    ];
    expect(queuePosition(tasks, "fl-5")).toEqual({ position: 1, of: 3, busy: 3, cap: 3 });
    expect(queuePosition(tasks, "fl-4")).toEqual({ position: 2, of: 3, busy: 3, cap: 3 });
    expect(queuePosition(tasks, "fl-6", { max_concurrent: 5 })).toEqual({
      position: 3,
      of: 3,
      busy: 3,
      cap: 5,
    });
  });

  it("is undefined for unknown or non-queued tasks", () => {
    const tasks = [task({ issue: 1, state: "running" })];
    expect(queuePosition(tasks, "fl-1")).toBeUndefined();
    expect(queuePosition(tasks, "nope")).toBeUndefined();
  });
});

describe("scheduleNext with serialize_overlapping", () => {
  const serial = (on: boolean) => ({ config: { ...config(), serialize_overlapping: on } });
  const holds = (d: SchedulerDecision[]) => d.filter((x) => x.kind === "hold");

  it("holds a queued task whose files a running task touches, and lets a later task take the slot", () => {
    const tasks = [
      task({ issue: 101, state: "running", files: ["src/a.ts"], lease: lease(1, 10) }),
      task({ issue: 102, files: ["src/a.ts", "src/b.ts"], queuedAt: at(-30) }),
      task({ issue: 103, files: ["src/c.ts"], queuedAt: at(-20) }),
    ];
    const d = run(tasks, serial(true));
    expect(holds(d)).toEqual([
      { kind: "hold", taskId: "fl-102", reason: "waits for gh-101: both touch src/a.ts", waitsFor: 101 },
    ]);
    expect(dispatches(d)).toEqual([["fl-103", 2]]);
  });

  it("dispatches the earlier of two queued tasks on the same files and holds the later one", () => {
    const tasks = [
      task({ issue: 111, files: ["src/a.ts", "src/b.ts"], queuedAt: at(-10) }),
      task({ issue: 112, files: ["src/b.ts", "src/a.ts"], queuedAt: at(-20) }),
    ];
    const d = run(tasks, serial(true));
    expect(dispatches(d)).toEqual([["fl-112", 1]]);
    expect(holds(d)).toEqual([
      {
        kind: "hold",
        taskId: "fl-111",
        reason: "waits for gh-112: both touch src/a.ts, src/b.ts",
        waitsFor: 112,
      },
    ]);
  });

  it("runs overlapping tasks together when serialize_overlapping is off", () => {
    const tasks = [
      task({ issue: 121, state: "running", files: ["src/a.ts"], lease: lease(1, 10) }),
      task({ issue: 122, files: ["src/a.ts"], queuedAt: at(-20) }),
      task({ issue: 123, files: ["src/a.ts"], queuedAt: at(-10) }),
    ];
    const d = run(tasks, serial(false));
    expect(holds(d)).toEqual([]);
    expect(dispatches(d)).toEqual([
      ["fl-122", 2],
      ["fl-123", 3],
    ]);
  });

  it("does not hold tasks without files, or tasks whose running neighbour's lease expired", () => {
    const tasks = [
      task({ issue: 131, state: "running", files: ["src/a.ts"], lease: lease(1, -1) }),
      task({ issue: 132, files: ["src/a.ts"], queuedAt: at(-20) }),
      task({ issue: 133, queuedAt: at(-10) }),
    ];
    const d = run(tasks, serial(true));
    expect(d[0]).toEqual({ kind: "expire-lease", taskId: "fl-131" });
    expect(holds(d)).toEqual([]);
    expect(dispatches(d).map(([id]) => id)).toEqual(["fl-132", "fl-133"]);
  });
});
