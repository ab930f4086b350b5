import { describe, expect, it } from "vitest";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { emptyStateDoc, recordLedger } from "../../src/core/state-doc.ts";
import type { Task } from "../../src/core/task.ts";
import {
  budgetReadiness,
  ledgerSpend,
  nextMonthStart,
  nextUtcMidnight,
  overPerTaskBudget,
  perTaskLimits,
  perUserQuota,
  tasksRequestedToday,
} from "../../src/economy/budgets.ts";

const NOW = new Date("2025-03-31T18:30:00Z");
const budgets = (patch: object) => ({ ...defaultFleetConfig().budgets, ...patch });

describe("per-task ceilings", () => {
  it("takes the stricter of the repository's and the coder's", () => {
    const b = budgets({
      per_task_tokens: 1000,
      per_coder: { claude: { per_task_tokens: 500, per_task_usd: 2 } },
    });
    expect(perTaskLimits(b, "claude")).toEqual({ tokens: 500, usd: 2 });
    expect(perTaskLimits(b, "codex")).toEqual({ tokens: 1000, usd: 25 });
    // On by default: 10M tokens and $25 a task; 0 turns a ceiling off.
    expect(perTaskLimits(budgets({}), "claude")).toEqual({ tokens: 10_000_000, usd: 25 });
    expect(perTaskLimits(budgets({ per_task_tokens: 0, per_task_usd: 0 }), "claude")).toEqual({});
  });

  it("says why a task over its ceiling is stopped", () => {
    expect(overPerTaskBudget({ tokens: 100 }, { tokens: 100 })).toBeUndefined();
    expect(overPerTaskBudget({ tokens: 100 }, { tokens: 150 })).toBe(
      "stopped: the task used 150 tokens, over the per-task budget of 100",
    );
    expect(overPerTaskBudget({ usd: 1 }, { tokens: 5, costUsd: 1.5 })).toBe(
      "stopped: the task cost $1.50, over the per-task budget of $1.00",
    );
    expect(overPerTaskBudget({ usd: 1 }, { tokens: 5, costUsd: null })).toBeUndefined();
  });
});

describe("reset times (UTC)", () => {
  it("daily at the next midnight, monthly at the next month start", () => {
    expect(nextUtcMidnight(NOW).toISOString()).toBe("2025-04-01T00:00:00.000Z");
    expect(nextMonthStart(NOW).toISOString()).toBe("2025-04-01T00:00:00.000Z");
    expect(nextMonthStart(new Date("2025-12-05T00:00:00Z")).toISOString()).toBe("2026-01-01T00:00:00.000Z");
  });
});

describe("daily and monthly ceilings from the ledger", () => {
  let doc = emptyStateDoc();
  doc = recordLedger(doc, { day: "2025-03-31", coder: "claude", costUsd: 4 });
  doc = recordLedger(doc, { day: "2025-03-31", coder: "codex", costUsd: 1 });
  doc = recordLedger(doc, { day: "2025-03-02", coder: "claude", costUsd: 10 });
  doc = recordLedger(doc, { day: "2025-02-28", coder: "claude", costUsd: 100 });

  it("sums spend by day or month, per coder or for the repository", () => {
    expect(ledgerSpend(doc.ledger, "2025-03-31")).toBe(5);
    expect(ledgerSpend(doc.ledger, "2025-03-31", "claude")).toBe(4);
    expect(ledgerSpend(doc.ledger, "2025-03")).toBe(15);
  });

  it("holds a task whose repository or coder has spent its ceiling, naming the budget and its reset", () => {
    const task = { coder: "claude" };
    expect(budgetReadiness(budgets({ daily_usd: 6 }), doc.ledger, NOW)(task)).toEqual({ ready: true });
    expect(budgetReadiness(budgets({ daily_usd: 5 }), doc.ledger, NOW)(task)).toEqual({
      ready: false,
      reason: "held: the daily budget of $5.00 is used ($5.00 spent); it resets at 2025-04-01T00:00:00.000Z",
    });
    const monthly = budgetReadiness(budgets({ monthly_usd: 15 }), doc.ledger, NOW)(task);
    expect(monthly.ready === false && monthly.reason).toContain("monthly budget of $15.00");
    const perCoder = budgetReadiness(budgets({ per_coder: { claude: { daily_usd: 3 } } }), doc.ledger, NOW);
    expect(perCoder({ coder: "claude" })).toMatchObject({ ready: false });
    expect(perCoder({ coder: "codex" })).toEqual({ ready: true });
  });
});

describe("per-user daily task limit", () => {
  const t = (user: string, createdAt: string) => ({ requestedBy: user, createdAt }) as Task;
  const tasks = [
    t("mona", "2025-03-31T01:00:00Z"),
    t("mona", "2025-03-31T02:00:00Z"),
    t("mona", "2025-03-30T23:00:00Z"),
    t("hubot", "2025-03-31T01:00:00Z"),
  ];

  it("counts tasks the user requested today (UTC)", () => {
    expect(tasksRequestedToday(tasks, "mona", NOW)).toBe(2);
  });

  it("refuses one more over the limit, and says when it resets", () => {
    expect(perUserQuota(undefined, tasks, "mona", NOW)).toEqual({ allowed: true });
    expect(perUserQuota(3, tasks, "mona", NOW)).toEqual({ allowed: true });
    const r = perUserQuota(2, tasks, "mona", NOW);
    expect(r.allowed).toBe(false);
    expect(!r.allowed && r.reason).toContain("per_user_daily_tasks");
  });
});

describe("the gateway's ceilings and runaway limits in .github/fleet.yml", () => {
  it("are on by default; config set may lower them, never raise them or turn them off", async () => {
    const { checkOverride, parseFleetConfig } = await import("../../src/core/config.ts");
    const parsed = parseFleetConfig({});
    if (!parsed.ok) throw new Error("the empty file is valid");
    const f = parsed.config;
    expect(f.runaway).toEqual({ repeated_tool_calls: 5, idle_turns: 40 });
    for (const [key, lower, higher] of [
      ["budgets.per_task_tokens", 1_000_000, 20_000_000],
      ["budgets.per_task_usd", 5, 50],
      ["runaway.repeated_tool_calls", 3, 10],
      ["runaway.idle_turns", 20, 100],
    ] as const) {
      expect(checkOverride(f, key, lower), key).toBeUndefined();
      expect(checkOverride(f, key, higher), key).toContain("can only be lowered");
      expect(checkOverride(f, key, 0), key).toContain("0 would turn it off");
    }
    const off = parseFleetConfig({ budgets: { per_task_tokens: 0 }, runaway: { repeated_tool_calls: 0 } });
    expect(off.ok && perTaskLimits(off.config.budgets, "claude")).toEqual({ usd: 25 });
  });
});
