import { describe, expect, it } from "vitest";
import {
  applyClaim,
  applyClaims,
  CLOSED_BY_COMMIT,
  type ClaimRecord,
  claimRefName,
  claimSettled,
  dispatchesClosed,
  parseClaim,
  serializeClaim,
} from "../../src/core/claims.ts";
import { claimLease, dispatchHolder, expireLeases, type LeaseDoc, newLease } from "../../src/core/leases.ts";
import { dispatchedTask } from "../support/dispatched-task.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const later = (ms: number) => new Date(t0.getTime() + ms);

/** `n` tasks dispatched at t0 (unclaimed, slots 1..n). */
const dispatchedDoc = (n: number): LeaseDoc => {
  const doc: LeaseDoc = { tasks: {}, config: { max_concurrent: n } };
  for (let i = 1; i <= n; i++) doc.tasks[`fl-${i}`] = dispatchedTask(i, t0);
  return doc;
};

const claimOf = (task: string, holder: string, at = later(1000)): ClaimRecord => ({
  task,
  dispatchedAt: t0.toISOString(),
  holder,
  at: at.toISOString(),
  ttlMs: 60_000,
  startIn: "running",
});

describe("claims by ref (core/claims.ts)", () => {
  it("applies a claim exactly as the commit of the same claim would", () => {
    const doc = dispatchedDoc(2);
    const claim = claimOf("fl-1", "w1");
    const byCommit = claimLease(doc, "fl-1", {
      holder: "w1",
      now: new Date(claim.at),
      ttlMs: claim.ttlMs,
      startIn: () => "running",
    });
    expect(applyClaim(doc, claim)?.doc).toEqual(byCommit?.doc);
    expect(applyClaim(doc, claim)?.task).toMatchObject({
      state: "running",
      lease: { holder: "w1", slot: 1, acquiredAt: t0.toISOString(), expiresAt: later(61_000).toISOString() },
    });
  });

  it("one claim per dispatch: a second claim of it, a claim of an earlier dispatch, or of a cancelled task applies to nothing", () => {
    const doc = dispatchedDoc(1);
    const first = applyClaims(doc, [claimOf("fl-1", "w2", later(2000)), claimOf("fl-1", "w1", later(1000))]);
    // The older claim is applied first; the other finds the dispatch taken.
    expect(first.tasks["fl-1"]?.lease?.holder).toBe("w1");
    expect(applyClaim(first, claimOf("fl-1", "w2"))).toBeNull();

    // The lease ran out and the task was dispatched again: the old claim does not take the new dispatch.
    const { doc: expired } = expireLeases(doc, later(16 * 60_000));
    const again = structuredClone(expired);
    again.tasks["fl-1"] = {
      ...again.tasks["fl-1"]!,
      state: "dispatched",
      lease: newLease(dispatchHolder("local"), 1, later(17 * 60_000)),
    };
    expect(applyClaim(again, claimOf("fl-1", "w1"))).toBeNull();
    expect(claimSettled(again, claimOf("fl-1", "w1"))).toBe(true);

    const cancelled = structuredClone(doc);
    cancelled.tasks["fl-1"] = { ...cancelled.tasks["fl-1"]!, state: "cancelled" };
    expect(applyClaim(cancelled, claimOf("fl-1", "w1"))).toBeNull();
    expect(claimSettled(doc, claimOf("fl-1", "w1"))).toBe(false);
    expect(claimSettled(first, claimOf("fl-1", "w1"))).toBe(true);
  });

  it("finds the dispatches a commit closes (claimed, cancelled, removed), so the commit can create their refs", () => {
    const before = dispatchedDoc(4);
    let after = claimLease(before, "fl-2", { holder: "w1", now: later(500), ttlMs: 9000 })!.doc;
    const { lease: _gone, ...cancelled } = after.tasks["fl-3"]!;
    const tasks: LeaseDoc["tasks"] = { ...after.tasks, "fl-3": { ...cancelled, state: "cancelled" } };
    delete tasks["fl-4"];
    // fl-1 changes, but its dispatch stays open: no ref.
    tasks["fl-1"] = { ...tasks["fl-1"]!, title: "renamed" };
    after = { ...after, tasks };
    const at = later(700);
    const marker = (task: string) => ({
      task,
      dispatchedAt: t0.toISOString(),
      holder: CLOSED_BY_COMMIT,
      at: at.toISOString(),
      ttlMs: 1,
    });
    expect(dispatchesClosed(before, after, at)).toEqual([
      {
        task: "fl-2",
        dispatchedAt: t0.toISOString(),
        holder: "w1",
        at: later(500).toISOString(),
        ttlMs: 9000,
      },
      marker("fl-3"),
      marker("fl-4"),
    ]);
    // A marker applies to nothing, even on a state where the dispatch is open.
    expect(applyClaim(before, marker("fl-3"))).toBeNull();
    // A claim already in the base (by ref or commit) is not made again.
    expect(dispatchesClosed(after, after, at)).toEqual([]);
  });

  it("reads back what it writes and refuses anything else; names refs only for ids that can be one", () => {
    const claim: ClaimRecord = {
      ...claimOf("fl-1", "local:host:12"),
      process: { host: "h", bootId: "b", pidNs: "4026531836", uid: 0, pid: 12, start: "99" },
    };
    expect(parseClaim(serializeClaim(claim))).toEqual(claim);
    for (const junk of ["", "{", "null", "[]", '{"task":"fl-1"}', serializeClaim({ ...claim, ttlMs: -1 })])
      expect(parseClaim(junk)).toBeUndefined();
    expect(parseClaim(serializeClaim({ ...claim, startIn: "done" as never }))).toBeUndefined();
    expect(claimRefName("fleet/state", claim)).toBe(`refs/fleet/claims/fleet/state/fl-1/${t0.getTime()}`);
    expect(claimRefName("fleet/state", { ...claim, task: "bd-a1.2" })).toBe(
      `refs/fleet/claims/fleet/state/bd-a1.2/${t0.getTime()}`,
    );
    for (const task of ["a..b", "../x", "a b", "x.lock", "x.", "-x", ".x", "a/b", ""])
      expect(claimRefName("fleet/state", { ...claim, task })).toBeUndefined();
  });
});
