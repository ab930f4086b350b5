// A run's end is one commit on a state branch that every worker, runner and the app write. Giving it up
// after the store's usual retries lost the run: the task stayed held until its lease ran out, was
// dispatched again, and its agent ran again (an Actions job in the 200-task benchmark). A run's end
// keeps trying while its lease holds, alone beside its worker's write queue once its batch gave up, so
// the worker's other runs' writes do not wait for it. Real queue, claim, record step, write queue and CAS
// engine, on an in-memory state branch whose writes another writer wins as often as the test says.
import { describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../src/core/config.ts";
import { recordLedger } from "../../src/core/state-doc.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue } from "../../src/queue/repo-queue.ts";
import { type CasTransport, createCasStore } from "../../src/state/cas-store.ts";
import {
  createMemoryRepo,
  createMemoryStateStore,
  createMemoryTransport,
} from "../../src/state/memory-store.ts";
import { coalescingStore } from "../../src/state/write-queue.ts";
import { claimTaskState, startHeartbeat } from "../../src/worker/1-claim.ts";
import type { TaskOutcome } from "../../src/worker/3-attempt.ts";
import { recordOutcome } from "../../src/worker/5-record.ts";
import { executeTask } from "../../src/worker/execute-task.ts";

const TTL = 15 * 60_000;
const HOLDER = "actions:4242";

function busyBranch() {
  const repo = createMemoryRepo();
  const inner = createMemoryTransport({ repo });
  const rival = createMemoryStateStore({ repo, sleep: async () => {} });
  /** `lossesAfterNextWrite`: once the next write lands, that many of the writes after it lose. */
  const busy: { losses: number; lossesAfterNextWrite?: number } = { losses: 0 };
  const transport: CasTransport = {
    place: inner.place,
    read: (prev, only) => inner.read(prev, only),
    async write(base, files, message) {
      // Another writer's commit lands first, `losses` times over.
      if (busy.losses > 0) {
        busy.losses--;
        await rival.update(({ doc }) => ({
          doc: recordLedger(doc, { day: "2026-01-02", coder: "codex" }),
          message: "another writer",
        }));
      }
      const written = await inner.write(base, files, message);
      if (written.kind === "written" && busy.lossesAfterNextWrite !== undefined) {
        busy.losses = busy.lossesAfterNextWrite;
        busy.lossesAfterNextWrite = undefined;
      }
      return written;
    },
    history: (limit) => inner.history(limit),
  };
  const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
  const store = coalescingStore(
    createCasStore(transport, {
      // A backoff moves the clock by what it waited.
      sleep: async (ms) => {
        clock.now += ms;
      },
      random: () => 0.5,
      clock: () => new Date(clock.now),
    }),
    { maxDelayMs: 1 },
  );
  return { store, busy, clock, now: () => new Date(clock.now) };
}

/** The repository's queue on the busy branch, and a task of `issue` queued and dispatched on it. */
function queueOn(b: ReturnType<typeof busyBranch>) {
  const parsed = parseFleetConfig("dispatch: local\nplan_phase: false\nretries: { max: 0 }\n");
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  const config = parsed.config;
  const queue = createRepoQueue({
    repo: "octo/widgets",
    store: b.store,
    fileConfig: config,
    dispatcher: localDispatcher,
    clock: b.now,
    leaseTtlMs: TTL,
  });
  const dispatched = async (issue: number) => {
    const { task } = await queue.enqueue({
      issue,
      title: "Fix it",
      body: "Do it.",
      coder: "claude",
      model: "sonnet",
      priority: 2,
      requestedBy: "mona",
      dependsOn: [],
    });
    expect(task?.state).toBe("dispatched");
    return task!;
  };
  return { config, queue, dispatched };
}

/** A task queued and dispatched on the busy branch, then claimed by an Actions run's holder. */
async function claimedTask(b: ReturnType<typeof busyBranch>, issue: number) {
  const { config, queue, dispatched } = queueOn(b);
  const task = await dispatched(issue);
  const claimed = await claimTaskState(b.store, task.id, HOLDER, b.now(), TTL, () => "running");
  expect(claimed?.task.state).toBe("running");
  return { config, queue, task: claimed!.task };
}

describe("a run's end on a busy state branch", () => {
  it("a run's end keeps trying while its lease holds; without the lease's time it is given up after the usual retries", async () => {
    const b = busyBranch();
    const { store, busy, clock, now } = b;
    const { config, queue, task } = await claimedTask(b, 1);
    // The run took ten minutes: its lease, renewed at the claim, has five left.
    clock.now += 10 * 60_000;
    const beat = startHeartbeat({
      store,
      taskId: task.id,
      holder: HOLDER,
      ttlMs: TTL,
      everyMs: 60 * 60_000,
      clock: now,
      log: () => {},
      renewedAt: task.lease!.heartbeatAt,
    });
    beat.stop();
    expect(beat.heldUntil()).toBe(Date.parse(task.lease!.heartbeatAt) + TTL);
    const outcome: TaskOutcome = {
      outcome: "pr-opened",
      pr: { number: 7, url: "https://github.test/octo/widgets/pull/7", head: "fleet/gh-1" },
      logPath: "",
      artifacts: {},
    };
    const record = { queue, config, holder: HOLDER, clock: now };

    // Without the lease's time: given up after 26 writes.
    busy.losses = 40;
    await expect(recordOutcome(task, outcome, record, undefined, undefined)).rejects.toThrow(
      /gave up after 26 conflicting writes/,
    );
    expect((await store.read()).doc.tasks[task.id]?.state).toBe("running");

    // With it: forty lost races later it lands, within the lease.
    busy.losses = 40;
    await recordOutcome(task, outcome, record, undefined, undefined, beat.heldUntil());
    const ended = (await store.read()).doc.tasks[task.id]!;
    expect(ended).toMatchObject({ state: "pr-open", pr: 7 });
    expect(ended.lease).toBeUndefined();
    expect(clock.now).toBeLessThan(beat.heldUntil());
  });

  it("a run's end stops trying once its lease has run out (the task is another run's by then)", async () => {
    const b = busyBranch();
    const { busy, clock, now } = b;
    const { config, queue, task } = await claimedTask(b, 2);
    const heldUntil = Date.parse(task.lease!.heartbeatAt) + TTL;
    clock.now = heldUntil - 30_000;
    busy.losses = 10_000;
    const outcome: TaskOutcome = { outcome: "failed", reason: "tests failed", logPath: "", artifacts: {} };
    await expect(
      recordOutcome(
        task,
        outcome,
        { queue, config, holder: HOLDER, clock: now },
        undefined,
        undefined,
        heldUntil,
      ),
    ).rejects.toThrow(/conflicting writes/);
    expect(clock.now).toBe(heldUntil);
    expect(busy.losses).toBeGreaterThan(0);
  });

  it("a run that ends before its agent (no adapter here) keeps trying within the lease its claim took, through executeTask; a worker already stopping does not", async () => {
    const b = busyBranch();
    const { config, queue, dispatched } = queueOn(b);
    const deps = (signal?: AbortSignal) => ({
      repo: { owner: "octo", repo: "widgets" },
      github: {} as never,
      store: b.store,
      queue,
      config,
      cloneUrl: "",
      workDir: "",
      adapterFor: () => undefined,
      holder: HOLDER,
      clock: b.now,
      leaseTtlMs: TTL,
      ...(signal ? { signal } : {}),
    });

    // The claim lands; the end then loses 40 races, past the store's 26 tries, and still lands.
    const first = (await dispatched(3)).id;
    b.busy.lossesAfterNextWrite = 40;
    await executeTask(first, deps());
    expect(b.busy.losses).toBe(0);
    expect((await b.store.read()).doc.tasks[first]).toMatchObject({ state: "failed" });
    expect((await b.store.read()).doc.tasks[first]?.lease).toBeUndefined();

    // A worker stopping already: the usual tries only, then the lease running out hands the task on.
    const second = (await dispatched(4)).id;
    const stopped = new AbortController();
    stopped.abort();
    b.busy.lossesAfterNextWrite = 40;
    await expect(executeTask(second, deps(stopped.signal))).rejects.toThrow(
      /gave up after 26 conflicting writes/,
    );
    expect((await b.store.read()).doc.tasks[second]?.lease?.holder).toBe(HOLDER);
  });
});
