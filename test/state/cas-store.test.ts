import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireSlot } from "../../src/core/leases.ts";
import {
  BEADS_PATH,
  type FleetStateDoc,
  recordLedger,
  STATE_PATH,
  StateCorruptError,
} from "../../src/core/state-doc.ts";
import { newTask } from "../../src/core/task.ts";
import { type CasTransport, createCasStore } from "../../src/state/cas-store.ts";
import {
  createMemoryRepo,
  createMemoryStateStore,
  createMemoryTransport,
} from "../../src/state/memory-store.ts";
import type { Mutation, UpdateResult } from "../../src/state/store.ts";
import { createWriteQueue } from "../../src/state/write-queue.ts";
import { type Backend, type StoreTuning, startEmulatorBackend, startMemoryBackend } from "./backends.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/beads", import.meta.url));
const BRANCH = "fleet/state";
// The compare-and-swap engine (src/state/cas-store.ts) as every store runs it: on the REST transport
// against the emulator and on the in-memory transport.
describe.each([
  ["REST transport on the emulator", startEmulatorBackend],
  ["in-memory transport", startMemoryBackend],
] as const)("state store (%s)", (_name, startBackend) => {
  let gh: Backend;
  beforeEach(async () => {
    gh = await startBackend();
  });
  afterEach(async () => {
    await gh.close();
  });

  const noSleep = async () => {};
  const makeStore = (extra: StoreTuning = {}) => gh.store({ sleep: noSleep, random: () => 0.5, ...extra });

  const increment: Mutation = ({ doc }) => ({
    doc: recordLedger(doc, { day: "2026-01-01", coder: "claude", usage: { input: 1 } }),
    message: "count a run",
  });
  const runsOf = (doc: FleetStateDoc) => doc.ledger["2026-01-01"]?.claude?.runs ?? 0;

  const withTask = (doc: FleetStateDoc, issue: number): FleetStateDoc => {
    const t = newTask({
      id: `fl-${issue}`,
      repo: "octo/widgets",
      issue,
      title: `#${issue}`,
      coder: "claude",
      model: "opus",
      now: "2026-01-01T00:00:00Z",
    });
    return { ...doc, tasks: { ...doc.tasks, [t.id]: t } };
  };
  const dispatch =
    (issue: number, holder: string, now = new Date("2026-01-01T01:00:00Z")): Mutation =>
    ({ doc }) => {
      const r = acquireSlot(doc, `fl-${issue}`, { holder, now, maxConcurrent: 1 });
      return r.ok ? { doc: r.doc, message: `dispatch gh-${issue} to claude (slot ${r.slot}/${r.of})` } : null;
    };
  it("creates the state branch on first use as an orphan commit holding both files", async () => {
    const store = makeStore();
    const empty = await store.read();
    expect(empty.version).toBe("");
    const r = await store.update(increment);
    expect(r.applied).toBe(true);
    const head = (await gh.head(BRANCH))!;
    expect(r.commit).toBe(head);
    expect(await gh.parents(head)).toEqual([]);
    expect(Object.keys(await gh.files(BRANCH)).sort()).toEqual([BEADS_PATH, STATE_PATH]);
    expect(JSON.parse((await gh.files(BRANCH))[STATE_PATH]!).ledger["2026-01-01"].claude.runs).toBe(1);
  });

  it("round-trips the beads fixtures byte for byte", async () => {
    const store = makeStore();
    for (const name of ["2025-12-01-64ef220", "2026-01-21-1f8a6bf", "head-fbcee6c"]) {
      const text = await readFile(join(FIXTURES, name, "issues.jsonl"), "utf8");
      const r = await store.update(() => ({ beads: text, message: `import ${name}` }));
      expect(r.applied).toBe(true);
      expect((await gh.files(BRANCH))[BEADS_PATH]).toBe(text);
      const fresh = await makeStore().read();
      expect(fresh.beads).toBe(text);
      expect(fresh.version).toBe(await gh.head(BRANCH));
    }
  });

  it("a change to both files is one commit", async () => {
    const store = makeStore();
    await store.update(increment);
    const before = (await gh.head(BRANCH))!;
    const r = await store.update(({ doc }) => ({
      doc: { ...doc, config: { max_concurrent: 4 } },
      beads: "{}\n",
      message: "both",
    }));
    expect(await gh.parents(r.commit!)).toEqual([before]);
    expect((await gh.files(BRANCH))[BEADS_PATH]).toBe("{}\n");
    expect(JSON.parse((await gh.files(BRANCH))[STATE_PATH]!).config.max_concurrent).toBe(4);
  });

  it("retries a conflicting write on fresh state and applies it once", async () => {
    const a = makeStore();
    const b = makeStore();
    await a.update(increment);
    await b.read(); // b caches the state after one run
    await a.update(increment); // a moves the branch; b's cache is now stale
    const rb = await b.update(increment);
    expect(rb.applied).toBe(true);
    expect(rb.retries).toBe(1);
    expect(runsOf((await makeStore().read()).doc)).toBe(3);
    expect(b.stats().conflicts).toBe(1);
  });

  // Both writers make the same tree on the same parent within a second: without a unique commit message
  // they minted the same commit and the second ref update passed as a no-op, losing an increment.
  it("interleaved writers in a commit-consistency store also never lose an update", async () => {
    const a = makeStore({ consistency: "commit" });
    const b = makeStore({ consistency: "commit" });
    await a.update(increment);
    await b.read();
    await a.update(increment);
    const rb = await b.update(increment);
    const final = runsOf((await makeStore().read()).doc);
    expect({ final, retries: rb.retries }).toEqual({ final: 3, retries: 1 });
  });

  it("drops a transition that no longer applies after another writer took the slot", async () => {
    const a = makeStore();
    const b = makeStore();
    await a.update(({ doc }) => ({ doc: withTask(withTask(doc, 1), 2), message: "queue gh-1, gh-2" }));
    await b.read();
    expect((await a.update(dispatch(1, "replica-a"))).applied).toBe(true);
    const rb = await b.update(dispatch(2, "replica-b"));
    expect(rb).toMatchObject({ applied: false, retries: 1 });
    const { doc } = await makeStore().read();
    expect(doc.tasks["fl-1"]!.lease?.holder).toBe("replica-a");
    expect(doc.tasks["fl-2"]!.lease).toBeUndefined();
    expect(await gh.lastMessage(BRANCH)).toBe("dispatch gh-1 to claude (slot 1/1) [skip ci]");
  });

  it("re-checks fresh state before dropping a transition judged on its cache", async () => {
    const a = makeStore();
    const b = makeStore();
    await a.update(({ doc }) => ({ doc: withTask(withTask(doc, 1), 2), message: "queue" }));
    await a.update(dispatch(1, "replica-a"));
    await b.read(); // b sees the slot taken
    await a.update(({ doc }) => {
      const { lease: _l, ...t } = doc.tasks["fl-1"]!;
      return { doc: { ...doc, tasks: { ...doc.tasks, "fl-1": t } }, message: "release gh-1" };
    });
    const rb = await b.update(dispatch(2, "replica-b"));
    expect(rb.applied).toBe(true);
  });

  it("reclaims a stale lease's slot for a new task", async () => {
    const store = makeStore();
    await store.update(({ doc }) => ({ doc: withTask(withTask(doc, 1), 2), message: "queue" }));
    await store.update(dispatch(1, "worker-gone", new Date("2026-01-01T01:00:00Z")));
    // Five minutes later the lease is still live: no slot. A lease lasts 15 minutes (DEFAULT_LEASE_TTL_MS).
    expect((await store.update(dispatch(2, "worker-2", new Date("2026-01-01T01:05:00Z")))).applied).toBe(
      false,
    );
    const r = await store.update(dispatch(2, "worker-2", new Date("2026-01-01T01:16:00Z")));
    expect(r.applied).toBe(true);
    expect(r.snapshot.doc.tasks["fl-1"]!.lease).toBeUndefined();
    expect(r.snapshot.doc.tasks["fl-2"]!.lease).toMatchObject({ holder: "worker-2", slot: 1 });
  });

  it("reports a corrupt state document and leaves the branch as it was", async () => {
    const store = makeStore();
    await store.update(increment);
    const bad = await gh.push(
      BRANCH,
      { [STATE_PATH]: '{"version": 1, "tasks": {', [BEADS_PATH]: "" },
      "hand edit",
    );
    await expect(makeStore().read()).rejects.toThrow(StateCorruptError);
    await expect(store.update(increment)).rejects.toThrow(
      /not valid JSON.*revert the last commit on fleet\/state/,
    );
    expect(await gh.head(BRANCH)).toBe(bad);
    await gh.push(BRANCH, { [STATE_PATH]: '{"version": 7}', [BEADS_PATH]: "" }, "from the future");
    await expect(store.read()).rejects.toThrow(/version 7.*newer Fleet/);
  });

  it("lists the branch history, newest first", async () => {
    const store = makeStore();
    await store.update(increment);
    await store.update(({ doc }) => ({
      doc: { ...doc, config: { max_concurrent: 2 } },
      message: "config set max_concurrent=2",
    }));
    const history = await store.history(5);
    expect(history.map((h) => h.message)).toEqual(["config set max_concurrent=2", "count a run"]);
    expect(history[0]!.sha).toBe(await gh.head(BRANCH));
  });

  it("coalesces a burst of 50 mutations into a few commits, each caller told its outcome", async () => {
    const store = makeStore();
    await store.update(({ doc }) => ({ doc: withTask(doc, 1), message: "queue gh-1" }));
    const queue = createWriteQueue(store, { maxDelayMs: 20 });
    const before = await gh.commitCount(BRANCH);
    const results = await Promise.all([
      ...Array.from({ length: 50 }, (_, i) =>
        queue.enqueue(({ doc }) => ({
          doc: recordLedger(doc, { day: "2026-01-01", coder: "claude", usage: { input: i } }),
          message: `label ${i}`,
        })),
      ),
      queue.enqueue(dispatch(1, "a")),
      queue.enqueue(dispatch(1, "b")), // fl-1 already leased by the one before: dropped
    ]);
    expect(results.slice(0, 51).every((r) => r.applied)).toBe(true);
    expect(results[51]!.applied).toBe(false);
    const commits = (await gh.commitCount(BRANCH)) - before;
    expect(commits).toBeGreaterThanOrEqual(1);
    expect(commits).toBeLessThanOrEqual(3);
    const { doc } = await makeStore().read();
    expect(runsOf(doc)).toBe(50);
    expect(doc.tasks["fl-1"]!.lease?.holder).toBe("a");
    expect(await gh.lastMessage(BRANCH)).toMatch(/^51 transitions \[skip ci\]\n\n- label 0\n/);
  });

  it("racing stores with a slot cap never over-grant and never lose an update", async () => {
    // Real backoff and pacing here: without them the racers starve one another on a slow server.
    const stores = Array.from({ length: 4 }, () =>
      makeStore({ random: Math.random, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) }),
    );
    await stores[0]!.update(({ doc }) => {
      let d: FleetStateDoc = { ...doc, config: { max_concurrent: 2 } };
      for (let i = 1; i <= 8; i++) d = withTask(d, i);
      return { doc: d, message: "queue 8" };
    });
    await Promise.all(
      stores.map(async (s, w) => {
        for (let i = 0; i < 10; i++) {
          await s.update(({ doc }) => {
            const r = acquireSlot(doc, `fl-${w * 2 + (i % 2) + 1}`, {
              holder: `w${w}`,
              now: new Date("2026-01-01T01:00:00Z"),
            });
            const base = recordLedger(r.ok ? r.doc : doc, { day: "2026-01-01", coder: "claude" });
            return { doc: base, message: `w${w} step ${i}` };
          });
        }
      }),
    );
    const { doc } = await makeStore().read();
    expect(runsOf(doc)).toBe(40);
    expect(Object.values(doc.tasks).filter((t) => t.lease).length).toBe(2);
  }, 300_000); // 40 racing REST commits with real backoff: 60 s to several minutes on a loaded 2-core machine
});

// The outcomes only some transports report (a lost answer, a per-file CAS, a write that needs a full
// read), scripted in front of the in-memory transport.
describe("CAS engine: what a transport's write may answer", () => {
  type Step = "answer-lost-after-write" | "answer-lost-before-write" | "stale" | "lost-on-state-file";
  const increment: Mutation = ({ doc }) => ({
    doc: recordLedger(doc, { day: "2026-01-01", coder: "claude" }),
    message: "count a run",
  });
  const runsOf = (doc: FleetStateDoc) => doc.ledger["2026-01-01"]?.claude?.runs ?? 0;

  function scripted() {
    const repo = createMemoryRepo();
    const inner = createMemoryTransport({ repo });
    const steps: Step[] = [];
    const reads: Array<string | undefined> = [];
    const transport: CasTransport = {
      place: inner.place,
      read: (prev, only) => {
        reads.push(only);
        return inner.read(prev, only);
      },
      async write(base, files, message) {
        const step = steps.shift();
        if (step === "stale") return { kind: "stale" };
        if (step === "answer-lost-before-write") return { kind: "unknown" };
        const out = await inner.write(base, files, message);
        if (step === "answer-lost-after-write") return { kind: "unknown" };
        if (step === "lost-on-state-file" && out.kind === "conflict")
          return { kind: "conflict", file: "state" };
        return out;
      },
      history: (limit) => inner.history(limit),
    };
    const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
    const store = createCasStore(transport, {
      sleep: async () => {},
      random: () => 0.5,
      clock: () => new Date(clock.now),
    });
    const other = createMemoryStateStore({ repo, sleep: async () => {} });
    return { repo, steps, reads, store, other, clock };
  }

  // A scheduling pass that finds nothing to start on the state a poll has just read drops out without a
  // second read; on an older state it is still checked on fresh state.
  it("drops a mutation on a cache read within trustCacheMs without reading again, and confirms past it", async () => {
    const { reads, store, other, clock } = scripted();
    await store.update(increment);
    await store.read();
    // Another writer makes the mutation apply; this store's cache does not show it.
    await other.update(increment);
    const onSecondRun: Mutation = (s) => (runsOf(s.doc) >= 2 ? increment(s) : null);
    reads.length = 0;
    clock.now += 4_000;
    expect(await store.update(onSecondRun, { trustCacheMs: 5_000 })).toMatchObject({ applied: false });
    expect(reads).toEqual([]);
    clock.now += 2_000;
    const r = await store.update(onSecondRun, { trustCacheMs: 5_000 });
    expect(r).toMatchObject({ applied: true });
    expect(reads).toEqual([undefined]);
    expect(runsOf(r.snapshot.doc)).toBe(3);
  });

  it("a read with maxAgeMs is served by a state read at most that long ago, without a request", async () => {
    const { reads, store, other, clock } = scripted();
    await store.update(increment);
    await store.read();
    await other.update(increment);
    reads.length = 0;
    clock.now += 3_000;
    expect(runsOf((await store.read({ maxAgeMs: 5_000 })).doc)).toBe(1);
    expect(reads).toEqual([]);
    clock.now += 3_000;
    expect(runsOf((await store.read({ maxAgeMs: 5_000 })).doc)).toBe(2);
    expect(reads).toEqual([undefined]);
    // Without the option every read is one; a clock gone back serves nothing from the cache.
    expect(runsOf((await store.read()).doc)).toBe(2);
    clock.now -= 60_000;
    await store.read({ maxAgeMs: 5_000 });
    expect(reads).toEqual([undefined, undefined, undefined]);
  });

  it("a re-read of one file does not make the whole cached state count as just read", async () => {
    const { steps, reads, store, other, clock } = scripted();
    await store.update(increment);
    await store.read();
    clock.now += 10_000;
    await other.update(increment);
    steps.push("lost-on-state-file");
    reads.length = 0;
    expect(await store.update(increment)).toMatchObject({ applied: true, retries: 1 });
    expect(reads).toEqual(["state"]);
    // The last whole read is 10 s old: a read that takes 5 s old reads.
    await store.read({ maxAgeMs: 5_000 });
    expect(reads).toEqual(["state", undefined]);
  });

  it("a write queue's batch that drops out whole trusts the cache only if every mutation in it does", async () => {
    const { reads, store, other } = scripted();
    await store.update(increment);
    await store.read();
    await other.update(increment);
    const queue = createWriteQueue(store, { maxDelayMs: 5 });
    const never: Mutation = () => null;
    reads.length = 0;
    await Promise.all([
      queue.enqueue(never, { trustCacheMs: 60_000 }),
      queue.enqueue(never, { trustCacheMs: 60_000 }),
    ]);
    expect(reads).toEqual([]);
    await Promise.all([queue.enqueue(never, { trustCacheMs: 60_000 }), queue.enqueue(never)]);
    expect(reads).toEqual([undefined]);
  });

  /**
   * An in-memory branch whose writes another writer wins first, `branch.losses` times over;
   * `oneAtATime`: operations run one at a time, as the git transport runs them on its cache; `reads`
   * collects each read's cause.
   */
  function losingBranch(opts: { oneAtATime?: boolean; reads?: string[] } = {}) {
    const repo = createMemoryRepo();
    const inner = createMemoryTransport({ repo });
    const rival = createMemoryStateStore({ repo, sleep: async () => {} });
    const branch = { losses: 0 };
    let chain: Promise<unknown> = Promise.resolve();
    const transport: CasTransport = {
      place: inner.place,
      read: (prev, only, cause) => {
        opts.reads?.push(String(cause));
        return inner.read(prev, only);
      },
      async write(base, files, message) {
        if (branch.losses > 0) {
          branch.losses--;
          await rival.update(increment);
        }
        return inner.write(base, files, message);
      },
      history: (limit) => inner.history(limit),
      ...(opts.oneAtATime
        ? {
            around<T>(_op: unknown, fn: () => Promise<T>): Promise<T> {
              const run = chain.then(fn, fn);
              chain = run.catch(() => undefined);
              return run;
            },
          }
        : {}),
    };
    return { transport, branch, rival };
  }

  it("counts a write whose answer was lost as written when the state holds it, without writing again", async () => {
    const { repo, steps, store } = scripted();
    await store.update(increment);
    steps.push("answer-lost-after-write");
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 0, commit: repo.refs.get("fleet/state") });
    expect(runsOf(r.snapshot.doc)).toBe(2);
    expect(store.conflicts()).toBe(0);
    expect((await store.history(10)).map((h) => h.message)).toEqual(["count a run", "count a run"]);
  });

  it("writes again on fresh state when the answer was lost before the write landed", async () => {
    const { steps, store } = scripted();
    await store.update(increment);
    steps.push("answer-lost-before-write");
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 1 });
    expect(runsOf(r.snapshot.doc)).toBe(2);
    expect(store.conflicts()).toBe(0);
  });

  it("reads in full and applies again, with no retry counted, when a write needs a fresh read first", async () => {
    const { steps, reads, store } = scripted();
    await store.update(increment);
    steps.push("stale");
    reads.length = 0;
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 0 });
    expect(reads).toEqual([undefined]);
    expect(runsOf(r.snapshot.doc)).toBe(2);
  });

  // A run's end on a busy branch (an Actions job among twenty writers): giving up after the usual
  // retries lost the run, and its agent ran again; within its lease it keeps trying.
  it("a write that loses its race past maxRetries keeps trying until retryUntilMs, then gives up", async () => {
    const { transport, branch } = losingBranch();
    const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
    const slept: number[] = [];
    const store = createCasStore(transport, {
      // Each backoff moves the store's clock by what it waited.
      sleep: async (ms) => {
        slept.push(ms);
        clock.now += ms;
      },
      random: () => 0.5,
      clock: () => new Date(clock.now),
    });
    await store.update(increment);
    branch.losses = 40;
    const until = clock.now + 60 * 60_000;
    const r = await store.update(increment, { maxRetries: 25, retryUntilMs: until });
    expect(r).toMatchObject({ applied: true, retries: 40 });
    expect(runsOf(r.snapshot.doc)).toBe(42);
    expect(clock.now).toBeLessThan(until);
    // Without it, the same race is given up after 26 writes; past the time, too.
    branch.losses = 40;
    await expect(store.update(increment, { maxRetries: 25 })).rejects.toThrow(
      /gave up after 26 conflicting writes/,
    );
    // Its 25 usual retries back off ~10 s here; past them it tries every few tens of ms until the deadline.
    branch.losses = 100_000;
    slept.length = 0;
    const shortly = clock.now + 20_000;
    await expect(store.update(increment, { maxRetries: 25, retryUntilMs: shortly })).rejects.toThrow(
      /conflicting writes/,
    );
    // Its last backoff ends at the deadline, not past it. Past the usual retries it backs off as a
    // second try does (a few write times, here tens of ms): hundreds of tries in the 10 s left, where a
    // backoff that went on growing (half a second each at least) made fewer than 25.
    expect(clock.now).toBe(shortly);
    expect(slept.length).toBeGreaterThan(100);
  });

  // A write that lost its race backs off before trying again; its process's reads (a worker's poll, a
  // heartbeat) go on meanwhile instead of waiting behind it, and the try after uses what such a read
  // brought: no read of its own.
  it("backs off outside its turn on the transport: a read meanwhile goes on and serves the next try", async () => {
    const reads: string[] = [];
    const { transport, branch } = losingBranch({ oneAtATime: true, reads });
    let store: ReturnType<typeof createCasStore>;
    let polled: Promise<unknown> | undefined;
    store = createCasStore(transport, {
      // The backoff: a poll of this process asks to read meanwhile, and is answered before it ends.
      sleep: async () => {
        polled = store.read({ why: "poll" });
        const answered = await Promise.race([
          polled.then(() => true),
          new Promise((r) => setTimeout(() => r(false), 2_000)),
        ]);
        expect(answered).toBe(true);
      },
      random: () => 0.5,
      pacing: 0,
    });
    await store.update(increment);
    reads.length = 0;
    branch.losses = 1;
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 1 });
    expect(runsOf(r.snapshot.doc)).toBe(3);
    // The poll's read during the backoff, and no "lost race" read of the update's own.
    expect(reads).toEqual(["poll"]);
    await polled;
  });

  // A store writing in a loop waits a little before its next write (pacing): outside its turn too.
  it("paces a write in a loop outside its turn on the transport: a read meanwhile is answered", async () => {
    const { transport: inner } = losingBranch({ oneAtATime: true });
    const transport: CasTransport = {
      ...inner,
      // A write that takes a while: a write right after it is paced by a share of it (up to 3 times).
      async write(base, files, message) {
        await new Promise((r) => setTimeout(r, 100));
        return inner.write(base, files, message);
      },
    };
    let store!: ReturnType<typeof createCasStore>;
    const answered: boolean[] = [];
    store = createCasStore(transport, {
      random: () => 0.5,
      pacing: 3,
      sleep: async () => {
        answered.push(
          await Promise.race([
            store.read({ why: "poll" }).then(() => true),
            new Promise<boolean>((r) => setTimeout(() => r(false), 2_000)),
          ]),
        );
      },
    });
    await store.update(increment);
    await store.update(increment);
    expect(answered).toEqual([true]);
  });

  // Each try still runs alone: a read asked while a try writes starts only once the write is done.
  it("a try runs alone on the transport: a read asked during its write waits for it", async () => {
    const repo = createMemoryRepo();
    const inner = createMemoryTransport({ repo });
    const events: string[] = [];
    let chain: Promise<unknown> = Promise.resolve();
    let store!: ReturnType<typeof createCasStore>;
    let asked: Promise<unknown> | undefined;
    const transport: CasTransport = {
      place: inner.place,
      read: (prev, only, cause) => {
        events.push(`read ${cause}`);
        return inner.read(prev, only);
      },
      async write(base, files, message) {
        if (!asked) asked = store.read({ why: "asked during the write" });
        await new Promise((r) => setTimeout(r, 20));
        events.push("write");
        return inner.write(base, files, message);
      },
      history: (limit) => inner.history(limit),
      around(_op, fn) {
        const run = chain.then(fn, fn);
        chain = run.catch(() => undefined);
        return run;
      },
    };
    store = createCasStore(transport, { sleep: async () => {}, random: () => 0.5, pacing: 0 });
    await store.update(increment);
    await asked;
    expect(events).toEqual(["read no cache", "write", "read asked during the write"]);
  });

  // Without a one-at-a-time transport (the REST one), reads overlap: one asked before a write of ours
  // landed, answered after, must not put its older state back, nor pass for the fresh state a try after a
  // lost race may use (it would drop a mutation that applies only on our write).
  it("a slow read answered after a newer read or a write of ours leaves the newer state in the cache", async () => {
    const repo = createMemoryRepo();
    const inner = createMemoryTransport({ repo });
    const rival = createMemoryStateStore({ repo, sleep: async () => {} });
    let holdNext = false;
    let release!: () => void;
    let loseNext = false;
    const transport: CasTransport = {
      place: inner.place,
      async read(prev, only) {
        const answer = await inner.read(prev, only);
        if (holdNext) {
          holdNext = false;
          await new Promise<void>((r) => {
            release = r;
          });
        }
        return answer;
      },
      async write(base, files, message) {
        if (loseNext) {
          loseNext = false;
          await rival.update(increment);
        }
        return inner.write(base, files, message);
      },
      history: (limit) => inner.history(limit),
    };
    let slowPoll: Promise<unknown> | undefined;
    let store!: ReturnType<typeof createCasStore>;
    store = createCasStore(transport, {
      random: () => 0.5,
      pacing: 0,
      // During the backoff: a poll, then the slow one (asked before the loss) answers.
      sleep: async () => {
        await store.read({ why: "poll" });
        release();
        await slowPoll;
      },
    });
    await store.update(increment);
    holdNext = true;
    slowPoll = store.read({ why: "slow poll" });
    await new Promise((r) => setImmediate(r));
    await store.update(increment);
    loseNext = true;
    const r = await store.update((st) => (runsOf(st.doc) >= 2 ? increment(st) : null));
    // The branch: ours 2, the rival's 1: the mutation applies on it.
    expect(r).toMatchObject({ applied: true });
    expect(runsOf(r.snapshot.doc)).toBe(4);
    expect(runsOf(((await slowPoll) as { doc: FleetStateDoc }).doc)).toBeGreaterThanOrEqual(2);
  });

  // Without a one-at-a-time transport: a read made while our write was out saw another writer's commit
  // that came after ours; our write's answer then puts our state in the cache, and that read's time no
  // longer vouches for it: a maxAgeMs read goes to the branch.
  it("a won write that replaced a read made while it was out is not served as a recent read", async () => {
    const { transport: inner, rival } = losingBranch();
    let store!: ReturnType<typeof createCasStore>;
    let readDuringWrite = false;
    const transport: CasTransport = {
      ...inner,
      async write(base, files, message) {
        const out = await inner.write(base, files, message);
        if (readDuringWrite) {
          readDuringWrite = false;
          await rival.update(increment);
          await store.read({ why: "poll" });
        }
        return out;
      },
    };
    store = createCasStore(transport, { random: () => 0.5, pacing: 0, sleep: async () => {} });
    await store.update(increment);
    readDuringWrite = true;
    expect(runsOf((await store.update(increment)).snapshot.doc)).toBe(2);
    expect(runsOf((await store.read({ maxAgeMs: 60_000 })).doc)).toBe(3);
  });

  // After a write lost its race the cache is known to be behind: another update of the process during
  // the backoff reads first instead of pushing on it (a sure loss).
  it("after a lost race, another update during the backoff reads before it writes", async () => {
    const { transport, branch } = losingBranch({ oneAtATime: true });
    let second: Promise<unknown> | undefined;
    let store!: ReturnType<typeof createCasStore>;
    store = createCasStore(transport, {
      random: () => 0.5,
      pacing: 0,
      sleep: async () => {
        if (!second) {
          second = store.update(increment);
          await second;
        }
      },
    });
    await store.update(increment);
    branch.losses = 1;
    const first = await store.update(increment);
    expect(first).toMatchObject({ applied: true, retries: 1 });
    // One race lost (the first update's), not two: the second read first instead of pushing on the
    // cache the first had just lost on.
    expect(store.conflicts()).toBe(1);
    expect(runsOf(first.snapshot.doc)).toBe(4);
  });

  // A try after a loss may use a read another operation made meanwhile, but not one a write has since
  // lost on too: that read is known to be behind as well.
  it("a retry does not use a read made during its backoff once another write lost on it", async () => {
    const { transport, branch, rival } = losingBranch({ oneAtATime: true });
    let sleeps = 0;
    let second: Promise<UpdateResult> | undefined;
    let secondLost!: () => void;
    const secondLostP = new Promise<void>((r) => {
      secondLost = r;
    });
    let firstDone!: () => void;
    const firstDoneP = new Promise<void>((r) => {
      firstDone = r;
    });
    let store!: ReturnType<typeof createCasStore>;
    store = createCasStore(transport, {
      random: () => 0.5,
      pacing: 0,
      sleep: async () => {
        sleeps++;
        if (sleeps === 1) {
          // The first update's backoff: a second update reads first (the cache is behind), and loses too.
          branch.losses = 1;
          second = store.update(increment);
          await secondLostP;
        } else if (sleeps === 2) {
          // The second's backoff: the first tries again now.
          secondLost();
          await firstDoneP;
        }
      },
    });
    await store.update(increment);
    branch.losses = 1;
    const first = await store.update(increment);
    firstDone();
    const other = await second!;
    expect(first).toMatchObject({ applied: true, retries: 1 });
    expect(other).toMatchObject({ applied: true, retries: 1 });
    // Two races lost, one each; the first's retry read before it wrote.
    expect(store.conflicts()).toBe(2);
    expect(runsOf((await rival.read()).doc)).toBe(5);
  });

  // Without a one-at-a-time transport: a read asked after another writer's commit landed, answered after
  // our own write's answer, returns what it read, not our write's state without that commit.
  it("a read answered after a write of ours returns its own answer when it is the newer", async () => {
    const repo = createMemoryRepo();
    const inner = createMemoryTransport({ repo });
    const rival = createMemoryStateStore({ repo, sleep: async () => {} });
    let holdWrite = false;
    let lateRead: Promise<{ doc: FleetStateDoc }> | undefined;
    let readHeld: (() => void) | undefined;
    let releaseRead!: () => void;
    const releaseReadP = new Promise<void>((r) => {
      releaseRead = r;
    });
    let store!: ReturnType<typeof createCasStore>;
    const transport: CasTransport = {
      place: inner.place,
      async read(prev, only) {
        const answer = await inner.read(prev, only);
        if (readHeld) {
          readHeld();
          readHeld = undefined;
          await releaseReadP;
        }
        return answer;
      },
      async write(base, files, message) {
        // Our write lands on the server; another writer commits after it; then this process reads,
        // before our write's answer has come back.
        const out = await inner.write(base, files, message);
        if (holdWrite) {
          holdWrite = false;
          await rival.update(increment);
          const held = new Promise<void>((r) => {
            readHeld = r;
          });
          lateRead = store.read({ why: "confirm" });
          await held;
        }
        return out;
      },
      history: (limit) => inner.history(limit),
    };
    store = createCasStore(transport, { random: () => 0.5, pacing: 0, sleep: async () => {} });
    await store.update(increment);
    holdWrite = true;
    const ours = await store.update(increment);
    expect(runsOf(ours.snapshot.doc)).toBe(2);
    releaseRead();
    expect(runsOf((await lateRead!).doc)).toBe(3);
  });

  // A worker's write queue holds its runs' heartbeats and ends: a run's end that must land goes on alone
  // once its batch gave up, and the queue's later batches do not wait for it.
  it("a write queue: a write with retryUntilMs goes on alone once its batch gave up; later batches do not wait", async () => {
    const { transport, branch } = losingBranch();
    const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
    // The persisting write's second backoff (the batch's three, then its own two) waits for the test to
    // let it go: meanwhile the queue goes on.
    let letGo!: () => void;
    const held = new Promise<void>((r) => {
      letGo = r;
    });
    let reachedHold!: () => void;
    const atHold = new Promise<void>((r) => {
      reachedHold = r;
    });
    let backoffs = 0;
    const store = createCasStore(transport, {
      sleep: async (ms) => {
        clock.now += ms;
        if (++backoffs === 5) {
          reachedHold();
          await held;
        }
      },
      random: () => 0.5,
      clock: () => new Date(clock.now),
      pacing: 0,
    });
    const queue = createWriteQueue(store, { maxDelayMs: 5, maxRetries: 3 });
    branch.losses = 6;
    const heartbeat = queue.enqueue(increment);
    const end = queue.enqueue(increment, { retryUntilMs: clock.now + 60 * 60_000 });
    // The batch of both gives up after 4 writes: the heartbeat with it; the end goes on alone.
    await expect(heartbeat).rejects.toThrow(/gave up after 4 conflicting writes/);
    // While the end waits in its backoff, a later batch of the queue lands.
    await Promise.race([
      atHold,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error("the end never reached its backoff")), 5_000),
      ),
    ]);
    const order: string[] = [];
    void end.then(() => order.push("end"));
    const later = await queue.enqueue(increment);
    order.push("later");
    expect(later).toMatchObject({ applied: true });
    letGo();
    const ended = await end;
    expect(order).toEqual(["later", "end"]);
    expect(ended).toMatchObject({ applied: true });
    expect(runsOf(ended.snapshot.doc)).toBe(6 + 2);
  });

  it("a write that asks for a fresh read twice in one try counts as a lost race, not an endless loop", async () => {
    const { steps, store } = scripted();
    await store.update(increment);
    steps.push("stale", "stale");
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 1 });
    expect(runsOf(r.snapshot.doc)).toBe(2);
    expect(store.conflicts()).toBe(1);
  });

  it("after a per-file conflict re-reads that file alone, and confirms a drop with a full read", async () => {
    const { steps, reads, store, other } = scripted();
    await store.update(increment);
    await other.update(increment);
    steps.push("lost-on-state-file");
    reads.length = 0;
    let calls = 0;
    const r = await store.update((s) => (++calls === 1 ? increment(s) : null));
    expect(r).toMatchObject({ applied: false, retries: 1 });
    expect(reads).toEqual(["state", undefined]);
    expect(store.conflicts()).toBe(1);
  });
});
