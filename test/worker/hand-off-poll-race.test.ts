// A local worker's commit claims a dispatched task for it (DispatchedTaker, the hand-off) while something
// else happens before that commit lands: a poll that read the state before it starts the same task, or
// the worker is stopped. The task must be run by the worker, or given back, never left held by it with
// nothing running (it waits for its lease to expire); and it runs under the repository's settings as a
// poll now would read them. Real worker, queue and write queue, on an in-memory state branch whose
// writes can be held where a push over the network waits.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parseFleetConfig } from "../../src/core/config.ts";
import type { FleetStateDoc } from "../../src/core/state-doc.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import type { GitHub } from "../../src/github/port.ts";
import type { ConfigLoad } from "../../src/github/read-config.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue } from "../../src/queue/repo-queue.ts";
import { createMemoryRepo, createMemoryStateStore } from "../../src/state/memory-store.ts";
import type { StateSnapshot, StateStore } from "../../src/state/store.ts";
import { type LocalWorker, startLocalWorker } from "../../src/worker/local-worker.ts";
import { botClient } from "../support/bot-client.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

const OWNER = "octo-org";
const NAME = "hand-off";
const FULL = `${OWNER}/${NAME}`;
const FLEET_YML = "dispatch: local\nmax_concurrent: 2\nplan_phase: false\nretries: { max: 0 }\n";

/**
 * The state branch as seen over the network: the next write whose state `holdNext`'s test matches is
 * committed, but its writer hears back only on release(), and until then reads still see the branch as
 * it was before it (the push is on its way).
 */
function slowPushStore(inner: StateStore) {
  let stale: StateSnapshot | undefined;
  let hold:
    | { when: (doc: FleetStateDoc) => boolean; reached: () => void; release: Promise<void> }
    | undefined;
  const store: StateStore = {
    read: async (o) => stale ?? inner.read(o),
    update: async (m, o) => {
      const before = await inner.read();
      const r = await inner.update(m, o);
      const h = hold;
      if (h && r.applied && h.when(r.snapshot.doc)) {
        hold = undefined;
        stale = before;
        h.reached();
        await h.release;
        stale = undefined;
      }
      return r;
    },
  };
  const holdNext = (when: (doc: FleetStateDoc) => boolean) => {
    let reached!: () => void;
    let release!: () => void;
    const reachedP = new Promise<void>((r) => {
      reached = r;
    });
    hold = { when, reached, release: new Promise<void>((r) => (release = r)) };
    return { reached: reachedP, release: () => release() };
  };
  return { store, holdNext };
}

describe("a hand-off claim on its way", () => {
  let gh: GitHubEmulator;
  let github: GitHub;
  let workDir: string;
  const workers: LocalWorker[] = [];

  beforeAll(async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    await gh.createRepo({
      owner: OWNER,
      name: NAME,
      files: { "README.md": "# h\n", ".github/fleet.yml": FLEET_YML },
    });
    github = githubOverOctokit(await botClient(gh, FULL));
    workDir = await mkdtemp(join(tmpdir(), "fleet-hand-off-race-"));
  });
  afterAll(async () => {
    for (const w of workers) await w.stop();
    await gh?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  /**
   * Two tasks and a worker of concurrency 2 over one state: the worker's poll claims the first task; the
   * second is dispatched by the app after that; the first run ends (no adapter: at once, with a commit
   * of the worker's queue), and that commit claims the second task. Resolves with that commit held.
   */
  async function handOffOnItsWay(name: string) {
    const issue = async (title: string) =>
      (await github.issues.create({ owner: OWNER, repo: NAME }, { title, body: title })).number;
    const [one, two] = [await issue("One"), await issue("Two")];
    const parsed = parseFleetConfig(FLEET_YML);
    if (!parsed.ok) throw new Error("bad config");
    const inner = createMemoryStateStore({ repo: createMemoryRepo(), branch: "fleet/state" });
    const { store, holdNext } = slowPushStore(inner);
    // The app's queue: it dispatches to any local worker.
    const app = createRepoQueue({
      repo: FULL,
      store: inner,
      fileConfig: parsed.config,
      dispatcher: localDispatcher,
    });
    const enqueue = (n: number) =>
      app.enqueue({
        issue: n,
        title: `#${n}`,
        coder: "claude",
        model: "sonnet",
        priority: 2,
        dependsOn: [],
        requestedBy: "mona",
      });
    await enqueue(one);
    const idOf = async (n: number) =>
      Object.values((await inner.read()).doc.tasks).find((t) => t.issue === n)!.id;
    const first = await idOf(one);
    const claimOfFirst = holdNext((doc) => doc.tasks[first]?.lease?.holder === name);
    const worker = startLocalWorker({
      name,
      repo: { owner: OWNER, repo: NAME },
      github,
      store,
      cloneUrl: "file:///nonexistent",
      workDir,
      adapterFor: () => undefined,
      concurrency: 2,
      pollMs: 600_000,
      trackerIntervalMs: 0,
      log: () => {},
    });
    workers.push(worker);
    await claimOfFirst.reached;
    await enqueue(two);
    const second = await idOf(two);
    expect((await inner.read()).doc.tasks[second]).toMatchObject({ state: "dispatched" });
    const handOff = holdNext((doc) => doc.tasks[second]?.lease?.holder === name);
    claimOfFirst.release();
    await handOff.reached;
    return { worker, second, inner, holdNext, release: handOff.release };
  }

  it("a poll that read the state before the commit starts the task too: it is run, not left held", async () => {
    const name = "local:test:1";
    const { worker, second, inner, release } = await handOffOnItsWay(name);
    // The poll reads the branch as it was (the second task dispatched) and starts the task.
    await worker.poll();
    release();
    await worker.idle();
    await worker.poll();
    await worker.idle();
    // With no adapter the second task's run, by whichever path, ends it failed.
    const after = (await inner.read()).doc.tasks[second]!;
    expect({ state: after.state, holder: after.lease?.holder, running: worker.running }).toEqual({
      state: "failed",
      holder: undefined,
      running: 0,
    });
  });

  it("a worker stopped meanwhile has, once stopped, nothing running and holds no task", async () => {
    const name = "local:test:2";
    const { worker, second, inner, holdNext, release } = await handOffOnItsWay(name);
    // The second task's run, if it starts, ends with a write held until the worker says it stopped (or,
    // for a stop that waits for it, a few seconds: a bound so the test ends, not a timing assertion).
    const endOfSecond = holdNext((doc) => doc.tasks[second]?.state === "failed");
    let runningWhenStopped: number | undefined;
    const stopped = worker.stop().then(() => {
      runningWhenStopped = worker.running;
    });
    release();
    await Promise.race([stopped, new Promise((r) => setTimeout(r, 5_000))]);
    endOfSecond.release();
    await stopped;
    await worker.idle();
    const after = (await inner.read()).doc.tasks[second]!;
    expect({ runningWhenStopped, heldByIt: after.lease?.holder === name }).toEqual({
      runningWhenStopped: 0,
      heldByIt: false,
    });
  });

  it("a task handed off runs under the repository's .github/fleet.yml as it is now, not as the ending run's poll read it", async () => {
    // One slot: the second task waits queued until the first run's end commit dispatches it (and
    // hands it off).
    let yml = "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\n";
    const loadConfig = async (): Promise<ConfigLoad> => {
      const parsed = parseFleetConfig(yml);
      if (!parsed.ok) throw new Error("bad config");
      return { ok: true, config: parsed.config };
    };
    const issue = async (title: string) =>
      (await github.issues.create({ owner: OWNER, repo: NAME }, { title, body: title })).number;
    const [one, two] = [await issue("One"), await issue("Two")];
    const inner = createMemoryStateStore({ repo: createMemoryRepo(), branch: "fleet/state" });
    const { store, holdNext } = slowPushStore(inner);
    const loaded = await loadConfig();
    if (!loaded.ok) throw new Error("bad config");
    const app = createRepoQueue({
      repo: FULL,
      store: inner,
      fileConfig: loaded.config,
      dispatcher: localDispatcher,
    });
    for (const n of [one, two])
      await app.enqueue({
        issue: n,
        title: `#${n}`,
        coder: "claude",
        model: "sonnet",
        priority: 2,
        dependsOn: [],
        requestedBy: "mona",
      });
    const idOf = async (n: number) =>
      Object.values((await inner.read()).doc.tasks).find((t) => t.issue === n)!.id;
    const [first, second] = [await idOf(one), await idOf(two)];
    expect((await inner.read()).doc.tasks[second]?.state).toBe("queued");
    const name = "local:test:3";
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
    try {
      const claimOfFirst = holdNext((doc) => doc.tasks[first]?.lease?.holder === name);
      const worker = startLocalWorker({
        name,
        repo: { owner: OWNER, repo: NAME },
        github,
        store,
        loadConfig,
        cloneUrl: "file:///nonexistent",
        workDir,
        adapterFor: () => undefined,
        concurrency: 1,
        pollMs: 600_000,
        trackerIntervalMs: 0,
        log: () => {},
      });
      workers.push(worker);
      await claimOfFirst.reached;
      // While the first task runs, the repository asks for a plan phase, and the worker's copy of the
      // file is old enough to be read again (it keeps one a minute).
      yml = yml.replace("plan_phase: false", "plan_phase: true");
      vi.setSystemTime(Date.now() + 2 * 60_000);
      const handOff = holdNext((doc) => doc.tasks[second]?.lease?.holder === name);
      claimOfFirst.release();
      await handOff.reached;
      const claimed = (await inner.read()).doc.tasks[second]!;
      handOff.release();
      await worker.idle();
      // Claimed as a poll now would: the plan phase first.
      expect(claimed.state).toBe("planning");
    } finally {
      vi.useRealTimers();
    }
  });
});
