import { describe, expect, it } from "vitest";
import { newLease } from "../../src/core/leases.ts";
import { emptyStateDoc } from "../../src/core/state-doc.ts";
import { newTask } from "../../src/core/task.ts";
import { createMemoryRepo, createMemoryStateStore } from "../../src/state/memory-store.ts";
import { renewalDue, startHeartbeat } from "../../src/worker/claim.ts";

const TTL = 15 * 60_000;
const EVERY = 1_000;

describe("the heartbeat of a run", () => {
  it("renews once a third of the lease has gone by (less half a beat), not at every beat", () => {
    const at = "2026-01-01T00:00:00.000Z";
    const later = (ms: number) => new Date(Date.parse(at) + ms);
    expect(renewalDue(at, later(EVERY), TTL, EVERY)).toBe(false);
    expect(renewalDue(at, later(TTL / 3 - EVERY), TTL, EVERY)).toBe(false);
    expect(renewalDue(at, later(TTL / 3 - EVERY / 2), TTL, EVERY)).toBe(true);
    // At the default pace (a beat every third of the lease) every beat renews.
    expect(renewalDue(at, later(TTL / 3), TTL, TTL / 3)).toBe(true);
  });

  it("commits nothing while the lease is fresh and nothing changed, and still sees a cancel", async () => {
    const repo = createMemoryRepo();
    const store = createMemoryStateStore({ repo, sleep: async () => {} });
    let now = Date.parse("2026-01-01T00:00:00.000Z");
    const clock = () => new Date(now);
    const task = {
      ...newTask({
        id: "fl-1",
        repo: "o/r",
        issue: 1,
        title: "t",
        coder: "claude",
        model: "m",
        now: clock().toISOString(),
      }),
      state: "running" as const,
      lease: newLease("local:w1", 1, clock(), TTL),
    };
    await store.update(() => ({ doc: { ...emptyStateDoc(), tasks: { [task.id]: task } }, message: "seed" }));
    const commits = () => repo.commits.size;
    const seeded = commits();

    const beat = startHeartbeat({
      store,
      taskId: task.id,
      holder: "local:w1",
      ttlMs: TTL,
      everyMs: 20,
      clock,
      log: () => {},
    });
    try {
      // Beats while the lease is fresh: reads only.
      await new Promise((r) => setTimeout(r, 120));
      expect(commits()).toBe(seeded);
      expect(beat.signal.aborted).toBe(false);
      // A third of the lease later the next beat renews it: one commit.
      now += TTL / 3;
      await new Promise((r) => setTimeout(r, 120));
      expect(commits()).toBe(seeded + 1);
      const renewed = (await store.read()).doc.tasks[task.id]!.lease!;
      expect(Date.parse(renewed.expiresAt)).toBe(now + TTL);
      // Cancelled elsewhere: the next beat (a read) sees it and stops the run.
      const other = createMemoryStateStore({ repo, sleep: async () => {} });
      await other.update(({ doc }) => {
        const { lease: _gone, ...rest } = doc.tasks[task.id]!;
        return { doc: { ...doc, tasks: { [task.id]: { ...rest, state: "cancelled" } } }, message: "cancel" };
      });
      await new Promise((r) => setTimeout(r, 120));
      expect(beat.signal.aborted).toBe(true);
      expect(beat.lost()).toBe("cancelled");
    } finally {
      beat.stop();
    }
  });
});
