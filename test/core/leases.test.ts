import { describe, expect, it } from "vitest";
import {
  acquireSlot,
  actionsRunHolder,
  claimLease,
  claimOrder,
  DEFAULT_LEASE_TTL_MS,
  dispatchHolder,
  expireLeases,
  heartbeatIntervalMs,
  type LeaseDoc,
  newLease,
  releaseLease,
  renewLease,
  runIdOfHolder,
  slotsInUse,
  takeDispatched,
} from "../../src/core/leases.ts";
import { newTask, type Task } from "../../src/core/task.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const later = (ms: number) => new Date(t0.getTime() + ms);
const docWith = (n: number, max = 2): LeaseDoc => {
  const doc: LeaseDoc = { tasks: {}, config: { max_concurrent: max } };
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
    expect(renewLease(a.doc, "fl-1", { holder: "w2", now: t0 })).toEqual({ ok: false, reason: "gone" });
    const renewed = renewLease(a.doc, "fl-1", { holder: "w1", now: later(900), ttlMs: 1000 });
    if (!renewed.ok) throw new Error("not renewed");
    const hb = renewed.doc;
    expect(hb.tasks["fl-1"]!.lease!.expiresAt).toBe(later(1900).toISOString());
    expect(renewed.message).toBe("heartbeat gh-1 (fl-1) by w1");
    expect(releaseLease(hb, "fl-1", { holder: "w2", now: t0 })).toBeNull();
    expect(releaseLease(hb, "fl-1", { holder: "w1", now: t0 })!.tasks["fl-1"]!.lease).toBeUndefined();
  });

  it("expires a stale lease, requeues its task and hands the slot to the next one", () => {
    const a = acquireSlot(docWith(2, 1), "fl-1", { holder: "gone", now: t0, ttlMs: 1000 });
    if (!a.ok) throw new Error("no slot");
    const { doc, expired } = expireLeases(a.doc, later(1000));
    expect(expired).toEqual([{ taskId: "fl-1", issue: 1, slot: 1, holder: "gone" }]);
    expect(doc.tasks["fl-1"]).toMatchObject({ state: "queued" });
    expect(doc.tasks["fl-1"]!.lease).toBeUndefined();
    const b = acquireSlot(a.doc, "fl-2", { holder: "w2", now: later(1000) });
    expect(b).toMatchObject({ ok: true, slot: 1, expired: [{ taskId: "fl-1" }] });
    // The holder of a reclaimed lease finds it gone at its next heartbeat.
    expect(renewLease(doc, "fl-1", { holder: "gone", now: later(1000) })).toEqual({
      ok: false,
      reason: "gone",
    });
  });

  it("renews a lease past its expiry that nobody reclaimed (the holder's beats failed for a while)", () => {
    const a = acquireSlot(docWith(2, 1), "fl-1", { holder: "w1", now: t0, ttlMs: 1000 });
    if (!a.ok) throw new Error("no slot");
    const r = renewLease(a.doc, "fl-1", { holder: "w1", now: later(5000), ttlMs: 1000 });
    expect(r.ok && r.task.lease?.expiresAt).toBe(later(6000).toISOString());
  });

  it("lasts 15 minutes, renewed every third of that", () => {
    const a = acquireSlot(docWith(1), "fl-1", { holder: "w1", now: t0 });
    if (!a.ok) throw new Error("no slot");
    expect(a.doc.tasks["fl-1"]!.lease!.expiresAt).toBe(later(15 * 60_000).toISOString());
    expect(DEFAULT_LEASE_TTL_MS).toBe(15 * 60_000);
    expect(heartbeatIntervalMs()).toBe(5 * 60_000);
  });

  it("a worker claims the dispatcher's lease or its own, never another worker's", () => {
    const dispatched = (holder: string): LeaseDoc => {
      const doc = docWith(1);
      doc.tasks["fl-1"] = { ...doc.tasks["fl-1"]!, lease: newLease(holder, 2, t0) };
      return doc;
    };
    const claim = claimLease(dispatched(dispatchHolder("local")), "fl-1", {
      holder: "w1",
      now: later(60_000),
      ttlMs: 1000,
      startIn: () => "running",
    });
    expect(claim?.task).toMatchObject({
      state: "running",
      lease: {
        holder: "w1",
        slot: 2,
        heartbeatAt: later(60_000).toISOString(),
        expiresAt: later(61_000).toISOString(),
      },
    });
    expect(claim?.message).toBe("claim gh-1 (fl-1) by w1 (slot 2), running");
    expect(claimLease(dispatched("w1"), "fl-1", { holder: "w1", now: t0 })?.task.state).toBe("dispatched");
    expect(claimLease(dispatched("w2"), "fl-1", { holder: "w1", now: t0 })).toBeNull();
    const queued = docWith(1);
    queued.tasks["fl-1"] = { ...queued.tasks["fl-1"]!, state: "queued" } as Task;
    expect(claimLease(queued, "fl-1", { holder: "w1", now: t0 })).toBeNull();
  });

  it("an Actions run claiming a task whose run id is not recorded records its own; a recorded id stays", () => {
    const dispatched = (runId?: string): LeaseDoc => {
      const doc = docWith(1);
      doc.tasks["fl-1"] = {
        ...doc.tasks["fl-1"]!,
        lease: newLease(dispatchHolder("actions"), 1, t0),
        ...(runId ? { runId } : {}),
      };
      return doc;
    };
    const claim = (doc: LeaseDoc, holder: string) => claimLease(doc, "fl-1", { holder, now: t0 })?.task;
    expect(claim(dispatched(), actionsRunHolder(4242))?.runId).toBe("4242");
    expect(claim(dispatched("17"), actionsRunHolder(4242))?.runId).toBe("17");
    // Any other holder names no run.
    expect(claim(dispatched(), "local:host:1")?.runId).toBeUndefined();
    expect(runIdOfHolder("actions:0")).toBeUndefined();
    expect(runIdOfHolder("actions:12x")).toBeUndefined();
    expect(runIdOfHolder(undefined)).toBeUndefined();
  });

  it("a renewal tells a cancelled task from a lost lease", () => {
    const doc = docWith(1);
    const { lease: _none, ...task } = doc.tasks["fl-1"]!;
    doc.tasks["fl-1"] = { ...task, state: "cancelled" };
    expect(renewLease(doc, "fl-1", { holder: "w1", now: t0 })).toEqual({ ok: false, reason: "cancelled" });
    expect(renewLease(doc, "fl-9", { holder: "w1", now: t0 })).toEqual({ ok: false, reason: "gone" });
  });
});

describe("takeDispatched: a worker's commit claims what it has room for", () => {
  const local = dispatchHolder("local");
  /** Tasks fl-1..fl-n dispatched to any local worker, each on a slot of its own. */
  const waiting = (n: number): LeaseDoc => {
    const doc = docWith(n, n);
    for (const [i, t] of Object.values(doc.tasks).entries()) t.lease = newLease(local, i + 1, t0);
    return doc;
  };
  const opts = {
    holder: "w1",
    from: local,
    now: t0,
    startIn: () => "running" as const,
    inHand: new Set<string>(),
  };

  it("claims up to its concurrency, less what it holds and what it has in hand", () => {
    const doc = waiting(5);
    // w1 holds fl-1 already; fl-2 is a claim of its own under way (in hand).
    doc.tasks["fl-1"] = { ...doc.tasks["fl-1"]!, state: "running", lease: newLease("w1", 1, t0) };
    const took = takeDispatched(doc, { ...opts, concurrency: 3, inHand: new Set(["fl-2"]) });
    expect(took?.taken.map((t) => t.id)).toEqual(["fl-3"]);
    expect(took?.doc.tasks["fl-3"]).toMatchObject({ state: "running", lease: { holder: "w1", slot: 3 } });
    expect(took?.doc.tasks["fl-2"]?.lease?.holder).toBe(local);
    expect(took?.messages).toEqual(["claim gh-3 (fl-3) by w1 (slot 3), running"]);
    // Full: nothing taken, no change.
    expect(takeDispatched(took!.doc, { ...opts, concurrency: 3, inHand: new Set(["fl-2"]) })).toBeNull();
  });

  it("takes no task another worker holds, no Actions dispatch, none it does not accept", () => {
    const doc = waiting(3);
    doc.tasks["fl-1"]!.lease = newLease("w2", 1, t0);
    doc.tasks["fl-2"]!.lease = newLease(dispatchHolder("actions"), 2, t0);
    expect(takeDispatched(doc, { ...opts, concurrency: 5, accepts: (t) => t.id !== "fl-3" })).toBeNull();
    expect(takeDispatched(doc, { ...opts, concurrency: 5 })?.taken.map((t) => t.id)).toEqual(["fl-3"]);
  });
});

describe("claimOrder", () => {
  const tasks = Array.from({ length: 40 }, (_, i) => ({ id: `fl-${i.toString(36)}` }));
  it("gives each worker an order of its own over the same tasks, the same every time", () => {
    const holders = Array.from({ length: 20 }, (_, i) => `local:host-${i}:${1000 + i}`);
    const orders = holders.map((h) => claimOrder(tasks, h));
    const byId = (xs: readonly { id: string }[]) => xs.map((t) => t.id).sort();
    for (const o of orders) expect(byId(o)).toEqual(byId(tasks));
    expect(claimOrder(tasks, holders[0]!)).toEqual(orders[0]);
    // 20 workers on 40 tasks: their first choices spread (all on one task would be the race it avoids).
    const firsts = new Set(orders.map((o) => o[0]!.id));
    expect(firsts.size).toBeGreaterThanOrEqual(8);
  });

  it("with a window, spreads tasks dispatched a moment apart too, and still puts one older than the window first", () => {
    const holders = Array.from({ length: 20 }, (_, i) => `local:host-${i}:${1000 + i}`);
    // A burst of labels: 40 dispatches a second apart, each its own commit.
    const burst = tasks.map((t, i) => ({
      ...t,
      lease: { acquiredAt: later(60_000 + i * 1000).toISOString() },
    }));
    const firstsOf = (xs: typeof burst, windowMs: number) =>
      new Set(holders.map((h) => claimOrder(xs, h, windowMs)[0]!.id));
    // Strictly oldest first, every worker races for the same task.
    expect(firstsOf(burst, 0).size).toBe(1);
    expect(firstsOf(burst, 60_000).size).toBeGreaterThanOrEqual(8);
    // Beyond the window, age orders again: the 31st second on waits behind the first 31 tasks.
    const order = claimOrder(burst, holders[0]!, 30_000).map((t) => t.id);
    expect(order.slice(31)).toEqual(burst.slice(31).map((t) => t.id));
    // A task dispatched well before the burst is everyone's first.
    const old = { id: "fl-old", lease: { acquiredAt: t0.toISOString() } };
    expect(firstsOf([...burst, old], 30_000)).toEqual(new Set(["fl-old"]));
  });
});
