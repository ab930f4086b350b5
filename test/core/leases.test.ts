import { describe, expect, it } from "vitest";
import { newTask } from "../../src/core/task.ts";
import { emptyStateDoc, type FleetStateDoc } from "../../src/state/doc.ts";
import {
  acquireSlot,
  expireLeases,
  heartbeatLease,
  releaseLease,
  slotsInUse,
} from "../../src/state/leases.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const later = (ms: number) => new Date(t0.getTime() + ms);
const docWith = (n: number, max = 2): FleetStateDoc => {
  const doc = { ...emptyStateDoc(), config: { max_concurrent: max } };
  for (let i = 1; i <= n; i++) {
    doc.tasks[`fl-${i}`] = {
      ...newTask({
        id: `fl-${i}`,
        repo: "o/r",
        issue: i,
        title: "",
        coder: "claude",
        model: "m",
        now: t0.toISOString(),
      }),
      state: "dispatched",
    };
  }
  return doc;
};

describe("leases", () => {
  it("grants the lowest free slots and never more than max_concurrent", () => {
    let doc = docWith(3);
    const a = acquireSlot(doc, "fl-1", { holder: "w1", now: t0 });
    expect(a).toMatchObject({ ok: true, slot: 1, of: 2 });
    doc = a.ok ? a.doc : doc;
    const b = acquireSlot(doc, "fl-2", { holder: "w2", now: t0 });
    doc = b.ok ? b.doc : doc;
    expect(acquireSlot(doc, "fl-3", { holder: "w3", now: t0 })).toMatchObject({
      ok: false,
      reason: "no-free-slot",
    });
    expect(acquireSlot(doc, "fl-1", { holder: "w1", now: t0 })).toMatchObject({
      ok: false,
      reason: "already-leased",
    });
    expect(slotsInUse(doc, t0)).toEqual(
      new Map([
        [1, "fl-1"],
        [2, "fl-2"],
      ]),
    );
  });

  it("heartbeat extends, release frees, and both refuse a foreign holder", () => {
    const a = acquireSlot(docWith(1), "fl-1", { holder: "w1", now: t0, ttlMs: 1000 });
    if (!a.ok) throw new Error("no slot");
    expect(heartbeatLease(a.doc, "fl-1", { holder: "w2", now: t0 })).toBeNull();
    const hb = heartbeatLease(a.doc, "fl-1", { holder: "w1", now: later(900), ttlMs: 1000 })!;
    expect(hb.tasks["fl-1"]!.lease!.expiresAt).toBe(later(1900).toISOString());
    expect(releaseLease(hb, "fl-1", { holder: "w2", now: t0 })).toBeNull();
    expect(releaseLease(hb, "fl-1", { holder: "w1", now: t0 })!.tasks["fl-1"]!.lease).toBeUndefined();
  });

  it("expires a stale lease, requeues its task and hands the slot to the next one", () => {
    const a = acquireSlot(docWith(2, 1), "fl-1", { holder: "gone", now: t0, ttlMs: 1000 });
    if (!a.ok) throw new Error("no slot");
    expect(heartbeatLease(a.doc, "fl-1", { holder: "gone", now: later(1000) })).toBeNull();
    const { doc, expired } = expireLeases(a.doc, later(1000));
    expect(expired).toEqual([{ taskId: "fl-1", issue: 1, slot: 1, holder: "gone" }]);
    expect(doc.tasks["fl-1"]).toMatchObject({ state: "queued" });
    expect(doc.tasks["fl-1"]!.lease).toBeUndefined();
    const b = acquireSlot(a.doc, "fl-2", { holder: "w2", now: later(1000) });
    expect(b).toMatchObject({ ok: true, slot: 1, expired: [{ taskId: "fl-1" }] });
  });
});
