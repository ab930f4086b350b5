import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../src/core/config.ts";
import { newTask } from "../../src/core/task.ts";
import type { EnqueueRequest } from "../../src/queue/repo-queue.ts";
import type { TaskOutcome } from "../../src/worker/3-attempt.ts";
import { queueCrossReview } from "../../src/worker/runs/cross-review.ts";

const task = newTask({
  id: "fl-1",
  repo: "o/r",
  issue: 4,
  title: "Add x",
  coder: "claude",
  model: "sonnet",
  now: "2026-01-01T00:00:00Z",
});
const opened: TaskOutcome = {
  outcome: "pr-opened",
  pr: { number: 9, url: "u", head: "fleet/4-x" },
  logPath: "",
  artifacts: {},
};

function recorder() {
  const asked: EnqueueRequest[] = [];
  return {
    asked,
    queue: {
      enqueue: async (r: EnqueueRequest) => {
        asked.push(r);
        return { applied: true, task: undefined };
      },
    },
  };
}

describe("cross_review", () => {
  it("queues a review of the Fleet PR that just opened by the other coder", async () => {
    const parsed = parseFleetConfig("cross_review: codex\n");
    if (!parsed.ok) throw new Error(parsed.problems.join("\n"));
    const r = recorder();
    expect(await queueCrossReview(task, opened, { queue: r.queue as never, config: parsed.config })).toBe(
      true,
    );
    expect(r.asked).toMatchObject([{ issue: 9, coder: "codex", review: { pr: 9 }, title: "Review: Add x" }]);
  });

  it("does nothing without the key, for the reviewer's own work, a later round, or another outcome", async () => {
    const none = parseFleetConfig("");
    const same = parseFleetConfig("cross_review: claude\n");
    const codex = parseFleetConfig("cross_review: codex\n");
    if (!none.ok || !same.ok || !codex.ok) throw new Error("config");
    const r = recorder();
    expect(await queueCrossReview(task, opened, { queue: r.queue as never, config: none.config })).toBe(
      false,
    );
    expect(await queueCrossReview(task, opened, { queue: r.queue as never, config: same.config })).toBe(
      false,
    );
    expect(
      await queueCrossReview({ ...task, pr: 9 }, opened, { queue: r.queue as never, config: codex.config }),
    ).toBe(false);
    expect(
      await queueCrossReview(
        task,
        { ...opened, outcome: "failed" },
        { queue: r.queue as never, config: codex.config },
      ),
    ).toBe(false);
    expect(r.asked).toEqual([]);
  });
});
