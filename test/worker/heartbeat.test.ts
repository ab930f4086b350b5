import { describe, expect, it } from "vitest";
import { newLease } from "../../src/core/leases.ts";
import { emptyStateDoc } from "../../src/core/state-doc.ts";
import { newTask } from "../../src/core/task.ts";
import { createMemoryRepo, createMemoryStateStore } from "../../src/state/memory-store.ts";
import type { StateStore } from "../../src/state/store.ts";
import { renewalDue, startHeartbeat } from "../../src/worker/1-claim.ts";

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

  it("before the run publishes, confirms it still holds the task: stops it when it does not, throws when it cannot tell", async () => {
    const repo = createMemoryRepo();
    const store = createMemoryStateStore({ repo, sleep: async () => {} });
    const clock = () => new Date("2026-01-01T00:00:00.000Z");
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
    const start = (s: StateStore = store) =>
      startHeartbeat({
        store: s,
        taskId: task.id,
        holder: "local:w1",
        ttlMs: TTL,
        everyMs: 60_000,
        clock,
        log: () => {},
      });

    const held = start();
    await held.confirm();
    expect(held.signal.aborted).toBe(false);
    held.stop();

    // Taken over by another worker (its lease expired meanwhile): stopped, nothing to publish.
    await store.update(({ doc }) => ({
      doc: { ...doc, tasks: { [task.id]: { ...task, lease: newLease("local:w2", 1, clock(), TTL) } } },
      message: "taken over",
    }));
    const lost = start();
    await lost.confirm();
    expect(lost.signal.aborted).toBe(true);
    expect(lost.lost()).toBe("lease lost");
    lost.stop();

    // The state cannot be read: the run may not publish as if it still held the task.
    const unreadable = start({
      read: () => Promise.reject(new Error("502 Bad Gateway")),
      update: store.update,
    });
    await expect(unreadable.confirm()).rejects.toThrow(
      "Fleet could not read its state to confirm this run still holds the task, so nothing was pushed (502 Bad Gateway).",
    );
    unreadable.stop();
  });
});
