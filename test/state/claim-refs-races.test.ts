// Claims by ref (core/claims.ts) where a hostile review found them wrong, on the memory transport (the same
// engine as git's): a branch rewound under a close's marker, clocks that disagree, a claim that waited its
// turn, a writer that makes no markers (the REST transport), the branch deleted. Each was a failing test
// before its fix.
import { describe, expect, it } from "vitest";
import { CLAIM_REF_GRACE_MS, CLOSED_BY_COMMIT, claimRefPrefix } from "../../src/core/claims.ts";
import { expireLeases } from "../../src/core/leases.ts";
import { type FleetStateDoc, recordLedger, STATE_PATH } from "../../src/core/state-doc.ts";
import { createMemoryRepo, createMemoryStateStore } from "../../src/state/memory-store.ts";
import { claimTaskState } from "../../src/worker/1-claim.ts";
import { dispatchedTask } from "../support/dispatched-task.ts";

const t0 = new Date("2026-03-01T10:00:00Z");
const TTL = 15 * 60_000;
const at = (ms: number) => new Date(t0.getTime() + ms);

const dispatched = (doc: FleetStateDoc, when = t0) => ({
  doc: { ...doc, tasks: { ...doc.tasks, "fl-1": dispatchedTask(1, when, TTL) } },
  message: "dispatch fl-1",
});
/** Stores on one memory repository with claims by ref, on a clock the test sets (`clock.now`). */
function world() {
  const repo = createMemoryRepo();
  const clock = { now: t0.getTime() };
  const base = {
    repo,
    claimRefs: true,
    sleep: async () => {},
    random: () => 0.5,
    clock: () => new Date(clock.now),
  };
  return { repo, clock, base };
}

const ledger = (doc: FleetStateDoc) => ({
  doc: recordLedger(doc, { day: "2026-03-01", coder: "claude", usage: { input: 1 } }),
  message: "unrelated write",
});

describe("claims by ref: a rewound branch, clocks, a writer without markers", () => {
  it("a dispatch reopened on the branch (a revert, a restore) under its close's marker: the next close replaces the marker instead of failing for good", async () => {
    const repo = createMemoryRepo();
    let now = t0.getTime();
    const clock = () => new Date(now);
    const opts = { repo, claimRefs: true, clock, sleep: async () => {}, random: () => 0.5 };
    const app = createMemoryStateStore(opts);
    await app.update(({ doc }) => dispatched(doc));
    const dispatchedState = repo.files("fleet/state")[STATE_PATH]!;
    // Nobody claimed it; its lease runs out and the scheduling pass reclaims it: the marker ref is made.
    now = at(TTL + 60_000).getTime();
    await app.update(({ doc }) => {
      const r = expireLeases(doc, clock());
      return r.expired.length ? { doc: r.doc, message: "reclaim" } : null;
    });
    const refs = [...repo.refs.keys()].filter((r) => r.startsWith(claimRefPrefix("fleet/state")));
    expect(refs).toHaveLength(1);
    // An operator reverts that commit (the remedy stateBranchRemedy names), within the grace.
    repo.push(
      "fleet/state",
      { ...repo.files("fleet/state"), [STATE_PATH]: dispatchedState },
      'Revert "reclaim"',
    );

    // The dispatch is open on the branch again; every writer's scheduling pass reclaims it again...
    const other = createMemoryStateStore(opts);
    const pass = other.update(
      ({ doc }) => {
        const r = expireLeases(doc, clock());
        return r.expired.length ? { doc: r.doc, message: "reclaim" } : null;
      },
      { maxRetries: 5 },
    );
    // Expected: the pass is written (the marker of a closed dispatch must not block a later close).
    await expect(pass).resolves.toMatchObject({ applied: true });
  });

  it("a worker's clock 3 minutes behind: its ref outlives the grace by the deleter's clock, and a worker on a poll from before the claim does not claim the dispatch again", async () => {
    const repo = createMemoryRepo();
    let now = t0.getTime();
    const base = { repo, claimRefs: true, sleep: async () => {}, random: () => 0.5 };
    const app = createMemoryStateStore({ ...base, clock: () => new Date(now) });
    await app.update(({ doc }) => dispatched(doc));

    const workerB = createMemoryStateStore({ ...base, clock: () => new Date(now) });
    now = at(10_000).getTime();
    await workerB.read({ why: "poll" }); // B's poll: fl-1 dispatched, unclaimed

    const skewA = -3 * 60_000;
    const workerA = createMemoryStateStore({ ...base, clock: () => new Date(now + skewA) });
    now = at(11_000).getTime();
    const a = await claimTaskState(workerA, "fl-1", "wA", new Date(now + skewA), TTL);
    expect(a?.task.lease?.holder).toBe("wA");

    // The app writes twice (anything): the first carries A's claim, the second deletes A's ref.
    now = at(12_000).getTime();
    await app.read();
    await app.update(({ doc }) => ledger(doc));
    now = at(13_000).getTime();
    await app.update(({ doc }) => ledger(doc));

    // B claims on its poll, 10 s old: fl-1 was A's all along.
    // B claims on its poll, 4 s old: decided on it (no fresh read), so only A's ref can refuse it.
    now = at(14_000).getTime();
    const b = await claimTaskState(workerB, "fl-1", "wB", new Date(now), TTL);
    expect(b).toBeUndefined();
  });

  it("a cancel written by a store that makes no marker (REST transport): a git worker's claim on its 10 s old poll is refused", async () => {
    const repo = createMemoryRepo();
    let now = t0.getTime();
    const clock = () => new Date(now);
    const gitWorker = createMemoryStateStore({ repo, claimRefs: true, clock });
    const restApp = createMemoryStateStore({ repo, clock });
    await restApp.update(({ doc }) => dispatched(doc));
    now = at(1_000).getTime();
    await gitWorker.read({ why: "poll" });
    now = at(2_000).getTime();
    await restApp.update(({ doc }) => {
      const { lease: _l, ...t } = doc.tasks["fl-1"]!;
      return {
        doc: { ...doc, tasks: { ...doc.tasks, "fl-1": { ...t, state: "cancelled" as const } } },
        message: "cancel",
      };
    });
    now = at(10_000).getTime();
    const claimed = await claimTaskState(gitWorker, "fl-1", "w1", clock(), TTL);
    expect(claimed).toBeUndefined();
  });
});

describe("claims by ref: a claim that waited, a deleted branch", () => {
  it("a claim that waited its turn on the store records an old `at`: its ref still outlives the grace, and a poll from before the claim does not claim the dispatch again", async () => {
    const { clock, base } = world();
    const app = createMemoryStateStore(base);
    await app.update(({ doc }) => dispatched(doc));
    const workerA = createMemoryStateStore(base);
    const workerB = createMemoryStateStore(base);
    // A's executeTask takes clock() at t0+10s; its claim then waits 150 s behind the worker's other git
    // operations (they share GitTransport.around one at a time: a slow network, a long queue of them).
    const aNow = at(10_000);
    clock.now = at(159_000).getTime();
    await workerB.read({ why: "poll" });
    clock.now = at(160_000).getTime();
    const a = await claimTaskState(workerA, "fl-1", "wA", aNow, TTL);
    expect(a?.task.lease?.holder).toBe("wA");
    clock.now = at(161_000).getTime();
    await app.read();
    await app.update(({ doc }) => ledger(doc)); // carries A's claim
    clock.now = at(162_000).getTime();
    await app.update(({ doc }) => ledger(doc)); // deletes A's ref: "older than the grace" by its `at`
    // B claims on its poll, 4 s old: decided on it, so only A's ref can refuse it.
    clock.now = at(163_000).getTime();
    const b = await claimTaskState(workerB, "fl-1", "wB", new Date(clock.now), TTL);
    expect(b).toBeUndefined();
  });

  it("the state branch deleted (an operator starting over): a worker's claim on its poll of the old state is refused", async () => {
    const repo = createMemoryRepo();
    let now = t0.getTime();
    const base = { repo, claimRefs: true, clock: () => new Date(now) };
    const app = createMemoryStateStore(base);
    await app.update(({ doc }) => dispatched(doc));
    const worker = createMemoryStateStore(base);
    now = at(1_000).getTime();
    await worker.read({ why: "poll" });
    repo.refs.delete("fleet/state");
    // A claim is decided on a cached state 5 s old at most (within that, the run's heartbeat finds it out).
    now = at(7_000).getTime();
    expect(await claimTaskState(worker, "fl-1", "w1", new Date(now), TTL)).toBeUndefined();
  });

  it("a ref this version cannot read (a newer Fleet's claim) is never taken by a claim; a close replaces it only after the grace", async () => {
    const { repo, clock, base } = world();
    const app = createMemoryStateStore(base);
    await app.update(({ doc }) => dispatched(doc));
    const ref = `${claimRefPrefix("fleet/state")}fl-1/${t0.getTime()}`;
    repo.refs.set(
      ref,
      repo.commit([], {}, JSON.stringify({ task: "fl-1", holder: "w-new", startIn: "reviewing" })),
    );
    const worker = createMemoryStateStore(base);
    clock.now = at(1_000).getTime();
    await worker.read({ why: "poll" });
    clock.now = at(2_000).getTime();
    await worker.read({ why: "poll" });
    expect(await claimTaskState(worker, "fl-1", "w1", new Date(clock.now), TTL)).toBeUndefined();
    // Its dispatch runs out and is reclaimed: within the grace the close is refused, after it it lands.
    const reclaim = ({ doc }: { doc: FleetStateDoc }) => {
      const r = expireLeases(doc, new Date(clock.now));
      return r.expired.length ? { doc: r.doc, message: "reclaim" } : null;
    };
    clock.now = at(TTL + 1_000).getTime();
    await app.read();
    await expect(app.update(reclaim, { maxRetries: 2 })).rejects.toThrow(/conflicting writes/);
    clock.now = at(TTL + CLAIM_REF_GRACE_MS + 5_000).getTime();
    await app.read();
    await expect(app.update(reclaim)).resolves.toMatchObject({ applied: true });
    expect(JSON.parse(repo.commits.get(repo.refs.get(ref)!)!.message)).toMatchObject({
      holder: CLOSED_BY_COMMIT,
    });
  });

  it("an Actions run's second attempt, deciding on a poll from before its first attempt's claim, is refused by ref and then claims by commit as the holder", async () => {
    const { repo, clock, base } = world();
    const app = createMemoryStateStore(base);
    await app.update(({ doc }) => dispatched(doc));
    const holder = "actions:123";
    // The second attempt's process has read the state before the first attempt claimed (GitHub's
    // "re-run jobs" gives the run the same id, so the same holder).
    const second = createMemoryStateStore(base);
    await second.read();
    clock.now = at(1_000).getTime();
    const first = createMemoryStateStore(base);
    expect((await claimTaskState(first, "fl-1", holder, at(1_000), TTL))?.task.lease?.holder).toBe(holder);
    const head = repo.refs.get("fleet/state");
    clock.now = at(2_000).getTime();
    // Its claim by ref is refused (the ref is the first attempt's); read again, the lease is its own.
    const claimed = await claimTaskState(second, "fl-1", holder, at(2_000), TTL);
    expect(claimed?.task).toMatchObject({ state: "dispatched", runId: "123" });
    expect(claimed?.task.lease).toMatchObject({ holder, heartbeatAt: at(2_000).toISOString() });
    expect(repo.refs.get("fleet/state")).not.toBe(head);
    expect(JSON.parse(repo.files("fleet/state")[STATE_PATH]!).tasks["fl-1"].lease.holder).toBe(holder);
  });

  it("a dispatch with less than three quarters of its lease left is claimed by commit, not by ref", async () => {
    const repo = createMemoryRepo();
    let now = t0.getTime();
    const base = { repo, claimRefs: true, clock: () => new Date(now) };
    const app = createMemoryStateStore(base);
    await app.update(({ doc }) => dispatched(doc));
    const head = repo.refs.get("fleet/state");
    const worker = createMemoryStateStore(base);
    now = at(TTL / 4 + 1_000).getTime();
    const claimed = await claimTaskState(worker, "fl-1", "w1", new Date(now), TTL);
    expect(claimed?.task.lease?.holder).toBe("w1");
    expect(repo.refs.get("fleet/state")).not.toBe(head);
    const files = repo.files("fleet/state");
    expect(JSON.parse(files[STATE_PATH]!).tasks["fl-1"].lease.holder).toBe("w1");
    // The commit that claimed it made its ref too (a claim, not a marker).
    const refs = [...repo.refs.keys()].filter((r) => r.startsWith(claimRefPrefix("fleet/state")));
    expect(refs.map((r) => JSON.parse(repo.commits.get(repo.refs.get(r)!)!.message).holder)).toEqual(["w1"]);
  });

  // A write of the worker lost its race, so its cache is known to be behind: a claim it decides during that
  // write's backoff reads first, however recent the cache's read (the write's backoff no longer holds the
  // store's turn, so the claim does not wait for it).
  it("a claim decided while its process's write backs off after a lost race reads the state first", async () => {
    const { base, clock } = world();
    const app = createMemoryStateStore(base);
    await app.update(({ doc }) => dispatched(doc));
    let claimed: Promise<{ holder?: string; reads: number }> | undefined;
    let worker!: ReturnType<typeof createMemoryStateStore>;
    worker = createMemoryStateStore({
      ...base,
      sleep: async () => {
        if (claimed) return;
        const before = worker.stats().reads;
        claimed = claimTaskState(worker, "fl-1", "local:w2", new Date(clock.now), TTL).then((c) => ({
          holder: c?.task.lease?.holder,
          reads: worker.stats().reads - before,
        }));
        await claimed;
      },
    });
    await worker.read();
    await app.update(({ doc }) => ledger(doc));
    expect(await worker.update(({ doc }) => ledger(doc))).toMatchObject({ applied: true, retries: 1 });
    expect(await claimed).toEqual({ holder: "local:w2", reads: 1 });
  });
});
