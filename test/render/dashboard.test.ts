import { describe, expect, it } from "vitest";
import { newTask, type Task } from "../../src/core/task.ts";
import {
  DASHBOARD_MARKER,
  dashboardContent,
  dependencyMermaid,
  renderDashboard,
} from "../../src/render/dashboard.ts";

const NOW = "2025-03-01T12:00:00.000Z";
const usage = (input: number, output: number) => ({
  input,
  output,
  cacheRead: 0,
  cacheWrite: 0,
  reasoning: 0,
});
const task = (id: string, issue: number, patch: Partial<Task> = {}): Task => ({
  ...newTask({ id, repo: "o/r", issue, title: `Issue ${issue}`, coder: "claude", model: "sonnet", now: NOW }),
  ...patch,
});
const lease = (slot: number) => ({
  holder: "w",
  slot,
  acquiredAt: NOW,
  heartbeatAt: NOW,
  expiresAt: "2025-03-01T12:15:00.000Z",
});

const tasks: Task[] = [
  task("fl-run", 1, {
    state: "running",
    lease: lease(1),
    totals: { usage: usage(1000, 200), costUsd: 0.5, turns: 3, durationMs: 1000, model: "claude-sonnet" },
  }),
  task("fl-q2", 3, { queuedAt: "2025-03-01T11:00:00.000Z" }),
  task("fl-q1", 4, {
    queuedAt: "2025-03-01T10:00:00.000Z",
    reason: "held: the daily budget of $5.00 is used",
  }),
  task("fl-blk", 2, { state: "blocked", dependsOn: [1] }),
  task("fl-rl", 5, { state: "rate-limited", resetAt: "2025-03-01T12:05:00.000Z" }),
  task("fl-done", 6, {
    state: "done",
    coder: "codex",
    model: "gpt-5",
    totals: { usage: usage(3000, 100), costUsd: null, turns: 2, durationMs: 1000, model: "gpt-5" },
  }),
];

const body = renderDashboard({
  repo: "o/r",
  now: NOW,
  maxConcurrent: 2,
  tasks,
  credentials: [
    { coder: "claude", name: "KEY_A", coolingUntil: "2025-03-01T12:05:00.000Z" },
    { coder: "claude", name: "KEY_B", coolingUntil: "2025-03-01T11:00:00.000Z" },
  ],
  ledger: {
    "2025-02-28": { claude: { runs: 2, usage: usage(5000, 500), costUsd: 1.25 } },
    "2025-03-01": {
      claude: { runs: 1, usage: usage(1000, 200), costUsd: 0.5 },
      codex: { runs: 1, usage: usage(3000, 100), costUsd: 0 },
    },
  },
});

describe("the dashboard body", () => {
  it("carries its marker and the slots in use", () => {
    expect(body.startsWith(DASHBOARD_MARKER)).toBe(true);
    expect(body).toContain("## Running (1 of 2 slots busy: claude 1)");
    expect(body).toContain("| 1 | #1 Issue 1 | `fl-run` | `claude:sonnet` | running | 1,200 |");
  });

  it("lists waiting tasks in dispatch order, then blocked and rate-limited ones with what they wait for", () => {
    const rows = body.split("\n").filter((l) => /^\| (\d+|—) \| #\d/.test(l) && !l.includes("running"));
    expect(rows).toEqual([
      "| 1 | #4 Issue 4 | `fl-q1` | `claude:sonnet` | p2 | held: the daily budget of $5.00 is used |",
      "| 2 | #3 Issue 3 | `fl-q2` | `claude:sonnet` | p2 | a free slot |",
      "| — | #2 Issue 2 | `fl-blk` | `claude:sonnet` | p2 | blocked by #1 |",
      "| — | #5 Issue 5 | `fl-rl` | `claude:sonnet` | p2 | rate limit, resets 2025-03-01T12:05:00.000Z |",
    ]);
    expect(body).toContain("## Queued (4)");
  });

  it("shows each credential's window", () => {
    expect(body).toContain("| claude | `KEY_A` | 🧊 cooling until 2025-03-01T12:05:00.000Z |");
    // A cooling time in the past is an open window.
    expect(body).toContain("| claude | `KEY_B` | ✅ open |");
  });

  it("shows tokens and cost by day and coder, newest first, and by coder and model", () => {
    const day1 = body.indexOf("| 2025-03-01 | claude | 1 | 1,200 | $0.50 |");
    const day0 = body.indexOf("| 2025-02-28 | claude | 2 | 5,500 | $1.25 |");
    expect(day1).toBeGreaterThan(0);
    expect(day0).toBeGreaterThan(day1);
    expect(body).toContain("| 2025-03-01 | codex | 1 | 3,100 | $0.00 |");
    expect(body).toContain("| `claude:sonnet` | 1 | 1,200 | $0.50 |");
    expect(body).toContain("| `codex:gpt-5` | 1 | 3,100 | — |");
  });

  it("draws the live dependencies as Mermaid", () => {
    expect(body).toContain("```mermaid\ngraph TD");
    expect(body).toContain('  i1["#1 Issue 1 (running)"]');
    expect(body).toContain('  i2["#2 Issue 2 (blocked)"]');
    expect(body).toContain("  i1 --> i2");
  });

  it("needs no edit when only the time changed", () => {
    const later = renderDashboard({
      repo: "o/r",
      now: "2025-03-01T12:00:30.000Z",
      maxConcurrent: 2,
      tasks,
      credentials: [
        { coder: "claude", name: "KEY_A", coolingUntil: "2025-03-01T12:05:00.000Z" },
        { coder: "claude", name: "KEY_B", coolingUntil: "2025-03-01T11:00:00.000Z" },
      ],
      ledger: {
        "2025-02-28": { claude: { runs: 2, usage: usage(5000, 500), costUsd: 1.25 } },
        "2025-03-01": {
          claude: { runs: 1, usage: usage(1000, 200), costUsd: 0.5 },
          codex: { runs: 1, usage: usage(3000, 100), costUsd: 0 },
        },
      },
    });
    expect(later).not.toBe(body);
    expect(dashboardContent(later)).toBe(dashboardContent(body));
  });

  it("says so when there is nothing to show, and keeps titles from breaking tables or the graph", () => {
    const empty = renderDashboard({
      repo: "o/r",
      now: NOW,
      maxConcurrent: 3,
      tasks: [],
      credentials: [],
      ledger: {},
    });
    expect(empty).toContain("_Nothing is running._");
    expect(empty).toContain("_The queue is empty._");
    expect(empty).toContain("_No credential pools configured._");
    expect(empty).toContain("_No run has been recorded yet._");
    expect(empty).toContain("_No task waits for another._");
    const odd = [
      task("fl-a", 1, { title: 'Fix "quotes" | and [brackets]' }),
      task("fl-b", 2, { dependsOn: [1], state: "blocked" }),
    ];
    expect(dependencyMermaid(odd)).toContain('i1["#1 Fix quotes and brackets (queued)"]');
    expect(
      renderDashboard({ repo: "o/r", now: NOW, maxConcurrent: 1, tasks: odd, credentials: [], ledger: {} }),
    ).toContain('#1 Fix "quotes" \\| and [brackets]');
  });
});
