import { describe, expect, it } from "vitest";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { emptyStateDoc, recordLedger } from "../../src/core/state-doc.ts";
import { budgetHoldEndsAt } from "../../src/economy/budgets.ts";
import { applySchedule, enqueueTask } from "../../src/queue/transitions.ts";

const NOW = "2025-03-01T12:00:00.000Z";

const queued = () =>
  enqueueTask(emptyStateDoc(), {
    repo: "o/r",
    issue: 7,
    title: "Budgeted",
    coder: "claude",
    model: "sonnet",
    priority: 2,
    dependsOn: [],
    requestedBy: "mona",
    now: NOW,
  });

describe("daily ceiling in the scheduling pass", () => {
  it("holds a task when the ledger shows the day's budget spent, with the reason and reset on the task", () => {
    const { doc, task } = queued();
    const seeded = recordLedger(doc, { day: "2025-03-01", coder: "claude", costUsd: 5 });
    const config = { ...defaultFleetConfig(), budgets: { ...defaultFleetConfig().budgets, daily_usd: 5 } };
    const r = applySchedule(seeded, config, { now: NOW, holder: "dispatch:local" });
    const held = r.doc.tasks[task.id]!;
    expect(held.state).toBe("queued");
    expect(held.reason).toBe(
      "held: the daily budget of $5.00 is used ($5.00 spent); it resets at 2025-03-02T00:00:00.000Z",
    );
    // The same hold again changes nothing (no commit, no comment edit).
    expect(applySchedule(r.doc, config, { now: NOW, holder: "dispatch:local" }).changes).toEqual([]);
    // The next day the budget is fresh and the task starts; the hold reason goes.
    const next = applySchedule(r.doc, config, { now: "2025-03-02T00:00:01.000Z", holder: "dispatch:local" });
    expect(next.doc.tasks[task.id]?.state).toBe("dispatched");
    expect(next.doc.tasks[task.id]?.reason).toBeUndefined();
  });

  it("dispatches when the budget is not spent", () => {
    const { doc, task } = queued();
    const seeded = recordLedger(doc, { day: "2025-03-01", coder: "claude", costUsd: 4.99 });
    const config = { ...defaultFleetConfig(), budgets: { ...defaultFleetConfig().budgets, daily_usd: 5 } };
    expect(
      applySchedule(seeded, config, { now: NOW, holder: "dispatch:local" }).doc.tasks[task.id]?.state,
    ).toBe("dispatched");
  });
});

describe("when a budget hold ends", () => {
  const budgets = (b: object) => ({ ...defaultFleetConfig().budgets, ...b });
  const tasks = [{ coder: "claude", state: "queued" as const }];

  it("is the next UTC midnight for a daily ceiling, the next month for a monthly one, nothing without a hold", () => {
    const now = new Date(NOW);
    const spent = recordLedger(emptyStateDoc(), { day: "2025-03-01", coder: "claude", costUsd: 5 }).ledger;
    expect(budgetHoldEndsAt(budgets({ daily_usd: 5 }), spent, tasks, now)).toBe("2025-03-02T00:00:00.000Z");
    expect(budgetHoldEndsAt(budgets({ monthly_usd: 5 }), spent, tasks, now)).toBe("2025-04-01T00:00:00.000Z");
    // The daily ceiling resets tomorrow but the monthly one still holds then.
    expect(budgetHoldEndsAt(budgets({ daily_usd: 5, monthly_usd: 5 }), spent, tasks, now)).toBe(
      "2025-04-01T00:00:00.000Z",
    );
    expect(budgetHoldEndsAt(budgets({ daily_usd: 6 }), spent, tasks, now)).toBeUndefined();
    // Only queued tasks are held; a per-coder ceiling holds only that coder.
    expect(
      budgetHoldEndsAt(budgets({ daily_usd: 5 }), spent, [{ coder: "claude", state: "running" }], now),
    ).toBeUndefined();
    const perCoder = budgets({ per_coder: { codex: { daily_usd: 1 } } });
    expect(budgetHoldEndsAt(perCoder, spent, tasks, now)).toBeUndefined();
    expect(budgetHoldEndsAt(budgets({ per_coder: { claude: { daily_usd: 1 } } }), spent, tasks, now)).toBe(
      "2025-03-02T00:00:00.000Z",
    );
  });
});
