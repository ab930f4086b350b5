import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { execa } from "execa";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  BEADS_PATH,
  type FleetStateDoc,
  recordLedger,
  STATE_PATH,
  StateCorruptError,
} from "../../src/core/state-doc.ts";
import {
  createGitStateStore,
  STATE_GIT_CHANNEL,
  StateGitError,
  type StateGitEvent,
} from "../../src/state/git-store.ts";
import { gitBlobSha } from "../../src/state/github-store.ts";
import type { Mutation } from "../../src/state/store.ts";
import { type Backend, OWNER, REPO, startEmulatorBackend } from "./backends.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/beads", import.meta.url));
const BRANCH = "fleet/state";

describe("git state store (emulator over git smart HTTP)", () => {
  let gh: Backend & { emulator: GitHubEmulator };
  let dirs: string;
  let token: string;
  let cacheN = 0;
  beforeEach(async () => {
    gh = await startEmulatorBackend();
    dirs = await mkdtemp(join(tmpdir(), "fleet-git-store-"));
    token = gh.emulator.userToken("maintainer");
  });
  afterEach(async () => {
    await gh.close();
    await rm(dirs, { recursive: true, force: true });
  });

  const url = () => `${gh.emulator.url}/${OWNER}/${REPO}.git`;
  const makeStore = (extra: Partial<Parameters<typeof createGitStateStore>[0]> = {}) =>
    createGitStateStore({
      url: url(),
      token: () => token,
      owner: OWNER,
      repo: REPO,
      cacheDir: join(dirs, `cache-${++cacheN}`),
      sleep: async () => {},
      random: () => 0.5,
      ...extra,
    });
  const bareGit = async (...args: string[]) =>
    (await execa("git", ["-C", join(gh.emulator.dataDir, OWNER, `${REPO}.git`), ...args])).stdout.trim();

  const increment: Mutation = ({ doc }) => ({
    doc: recordLedger(doc, { day: "2026-01-01", coder: "claude", usage: { input: 1 } }),
    message: "count a run",
  });
  const runsOf = (doc: FleetStateDoc) => doc.ledger["2026-01-01"]?.claude?.runs ?? 0;

  it("creates the branch on first use as an orphan commit holding both files, without REST requests", async () => {
    const store = makeStore();
    const restMark = gh.emulator.requests.mark();
    const gitMark = gh.emulator.gitRequests.mark();
    const empty = await store.read();
    expect(empty).toMatchObject({ version: "", beads: "" });
    expect(empty.doc.tasks).toEqual({});
    const r = await store.update(increment);
    expect(r.applied).toBe(true);
    const head = (await gh.head(BRANCH))!;
    expect(r.commit).toBe(head);
    expect(r.snapshot.version).toBe(head);
    expect(await gh.parents(head)).toEqual([]);
    expect(Object.keys(await gh.files(BRANCH)).sort()).toEqual([BEADS_PATH, STATE_PATH]);
    expect(JSON.parse((await gh.files(BRANCH))[STATE_PATH]!).ledger["2026-01-01"].claude.runs).toBe(1);
    expect(await gh.lastMessage(BRANCH)).toMatch(/^count a run \[skip ci\]\n\nFleet-Write: [0-9a-f-]+$/);
    expect(gh.emulator.counts({ since: restMark }).total).toBe(0);
    expect(gh.emulator.gitRequests.counts({ since: gitMark }).pushes).toBe(2);
    expect(store.stats()).toMatchObject({ pushes: 1, conflicts: 0 });

    // The next write on the cache is one push (advertisement + pack), no fetch.
    const mark = gh.emulator.gitRequests.mark();
    await store.update(increment);
    expect(gh.emulator.gitRequests.counts({ since: mark })).toEqual({ total: 2, fetches: 0, pushes: 2 });
    expect(runsOf((await makeStore().read()).doc)).toBe(2);
  });

  it("a read costs one git request when the branch has not moved and two when it has; reads asked together share one", async () => {
    const writer = makeStore();
    const reader = makeStore();
    await writer.update(increment);
    await reader.read();
    let mark = gh.emulator.gitRequests.mark();
    await reader.read();
    expect(gh.emulator.gitRequests.counts({ since: mark })).toEqual({ total: 1, fetches: 1, pushes: 0 });
    await writer.update(increment);
    mark = gh.emulator.gitRequests.mark();
    expect(runsOf((await reader.read()).doc)).toBe(2);
    expect(gh.emulator.gitRequests.counts({ since: mark })).toEqual({ total: 2, fetches: 2, pushes: 0 });
    // Five reads asked before the first one started: one fetch. A read asked while one runs gets the next.
    await writer.update(increment);
    const fetches = reader.stats().fetches;
    const reads = await Promise.all([1, 2, 3, 4, 5].map(() => reader.read()));
    expect(reader.stats().fetches - fetches).toBe(1);
    expect(reads.map((r) => runsOf(r.doc))).toEqual([3, 3, 3, 3, 3]);
    // Each caller has its own copy.
    reads[1]!.doc.tasks.x = {} as never;
    expect(reads[2]!.doc.tasks.x).toBeUndefined();
  });

  // A cache lives as long as its process (`fleet serve`, `fleet run`: weeks): its history is cut back
  // to the head now and then, not kept from the process's start.
  it("keeps a bounded history in its cache: after trimEvery moves of the branch a read cuts it back to the head", async () => {
    const cacheDir = join(dirs, "trimmed");
    const reader = makeStore({ cacheDir, trimEvery: 5 });
    const writer = makeStore();
    const commitsInCache = async () =>
      Number(
        (
          await execa("git", ["-C", cacheDir, "rev-list", "--count", "refs/fleet/remote-state"])
        ).stdout.trim(),
      );
    const objectsInCache = async () => {
      const { stdout } = await execa("git", ["-C", cacheDir, "count-objects", "-v"]);
      const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(stdout)?.[1] ?? 0);
      return field("count") + field("in-pack");
    };
    const seen: number[] = [];
    for (let i = 0; i < 12; i++) {
      await writer.update(increment);
      // Every other round the reader writes too: its own commits count as moves.
      if (i % 2 === 0) await reader.update(increment);
      await reader.read();
      seen.push(await commitsInCache());
    }
    // 12 + 6 commits on the branch; the cache never held more than the moves since its last cut (plus one).
    expect(await gh.commitCount(BRANCH)).toBe(18);
    expect(Math.max(...seen)).toBeLessThanOrEqual(7);
    expect(seen.some((n, i) => i > 0 && n < seen[i - 1]!)).toBe(true);
    // Pruned, not only cut: the objects of the commits before the cut are gone.
    expect(await objectsInCache()).toBeLessThan(40);
    // And the cache still reads and writes: a race lost on it, too.
    await writer.update(increment);
    const r = await reader.update(increment);
    expect(r).toMatchObject({ applied: true });
    expect(runsOf(r.snapshot.doc)).toBe(20);
    expect(runsOf((await makeStore().read()).doc)).toBe(20);
  }, 120_000);

  it("cuts its history only once a read has fetched the head shallow: after a read that brought only a new claim ref, the read after the next move", async () => {
    const cacheDir = join(dirs, "trim-claim");
    const reader = makeStore({ cacheDir, trimEvery: 3 });
    const writer = makeStore();
    const commitsInCache = async () =>
      Number(
        (
          await execa("git", ["-C", cacheDir, "rev-list", "--count", "refs/fleet/remote-state"])
        ).stdout.trim(),
      );
    for (let i = 0; i < 4; i++) {
      await writer.update(increment);
      await reader.read();
    }
    expect(await commitsInCache()).toBe(4);
    // The branch stays where it is; a ref under the claims' prefix appears (a worker's claim, say).
    const head = (await gh.head(BRANCH))!;
    const other = await bareGit("commit-tree", `${head}^{tree}`, "-m", "not Fleet's claim");
    await bareGit("update-ref", `refs/fleet/claims/${BRANCH}/fl-x/1`, other);
    await reader.read();
    // git asked only for the ref that moved: the head was not fetched shallow, nothing was cut yet.
    expect(await commitsInCache()).toBe(4);
    // Nor on a read that finds nothing moved; the read after the branch's next move cuts.
    await reader.read();
    expect(await commitsInCache()).toBe(4);
    await writer.update(increment);
    await reader.read();
    expect(await commitsInCache()).toBe(5);
    await reader.read();
    expect(await commitsInCache()).toBe(1);
    expect(runsOf((await reader.update(increment)).snapshot.doc)).toBe(6);
  }, 60_000);

  it("a write on a base no longer in the cache reads afresh and applies, instead of failing", async () => {
    const cacheDir = join(dirs, "gone-base");
    const store = makeStore({ cacheDir });
    await store.update(increment);
    await makeStore().update(increment);
    await store.read();
    // The cached head's commit goes from the cache (a cut of its history, its read failing after).
    const git = (...args: string[]) => execa("git", ["-C", cacheDir, ...args]);
    for (const ref of (await git("for-each-ref", "--format=%(refname)")).stdout.split("\n"))
      if (ref) await git("update-ref", "-d", ref);
    await git("-c", "gc.pruneExpire=now", "gc", "--quiet");
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 0 });
    expect(runsOf(r.snapshot.doc)).toBe(3);
  }, 60_000);

  it("publishes each fetch and push with its cause on the diagnostics channel", async () => {
    const events: StateGitEvent[] = [];
    const onEvent = (m: unknown) => events.push(m as StateGitEvent);
    subscribe(STATE_GIT_CHANNEL, onEvent);
    try {
      const store = makeStore();
      await store.update(increment);
      await makeStore().update(increment);
      await store.update(increment);
    } finally {
      unsubscribe(STATE_GIT_CHANNEL, onEvent);
    }
    const ends = events
      .filter((e) => e.phase === "end")
      .map((e) => `${e.operation} ${e.cause}${e.rejected ? " rejected" : ""}`);
    expect(ends).toEqual([
      "fetch no cache",
      "push count a run",
      "fetch no cache",
      "push count a run",
      "push count a run rejected",
      "fetch lost race",
      "push count a run",
    ]);
  });

  it("the push is a real push: it emits the push webhook with the token's actor as pusher", async () => {
    await makeStore().update(increment);
    await gh.emulator.waitForDeliveries();
    const push = gh.emulator.deliveries().find((d) => d.event === "push");
    expect(push?.payload).toMatchObject({ ref: `refs/heads/${BRANCH}`, pusher: { name: "maintainer" } });
  });

  it("round-trips the state document and a beads file byte-for-byte, and keeps files it did not change", async () => {
    const beads = await readFile(join(FIXTURES, "head-fbcee6c", "issues.jsonl"), "utf8");
    const writer = makeStore();
    await writer.update(({ doc }) => ({
      doc: { ...doc, config: { max_concurrent: 2 } },
      beads,
      message: "import",
    }));
    const reader = makeStore();
    const snap = await reader.read();
    expect(snap.beads).toBe(beads);
    expect(snap.doc.config).toEqual({ max_concurrent: 2 });
    expect(await bareGit("rev-parse", `refs/heads/${BRANCH}:${BEADS_PATH}`)).toBe(gitBlobSha(beads));

    // Someone adds a file to the branch; a state-only change keeps it and the beads blob as they are.
    const files = await gh.files(BRANCH);
    await gh.push(BRANCH, { ...files, "NOTES.md": "kept\n" }, "notes");
    const beadsBlob = await bareGit("rev-parse", `refs/heads/${BRANCH}:${BEADS_PATH}`);
    const r = await reader.update(increment);
    expect(r.applied).toBe(true);
    expect(await bareGit("rev-parse", `refs/heads/${BRANCH}:${BEADS_PATH}`)).toBe(beadsBlob);
    expect((await gh.files(BRANCH))["NOTES.md"]).toBe("kept\n");
    expect(await gh.parents(r.commit!)).toEqual([await bareGit("rev-parse", `refs/heads/${BRANCH}~1`)]);
  });

  it("retries a write that lost to another store (separate cache) and applies it once", async () => {
    const a = makeStore();
    const b = makeStore();
    await a.update(increment);
    await b.read();
    await a.update(increment);
    // b's cache is one commit behind: its push is refused, it re-reads and re-applies.
    const r = await b.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 1 });
    expect(runsOf(r.snapshot.doc)).toBe(3);
    expect(b.stats().conflicts).toBe(1);
    expect(await gh.commitCount(BRANCH)).toBe(3);
  });

  it("drops a mutation that returns null, on fresh state, without a commit", async () => {
    const a = makeStore();
    const b = makeStore();
    await a.update(increment);
    await b.read();
    await a.update(increment);
    const head = await gh.head(BRANCH);
    const seen: number[] = [];
    const r = await b.update(({ doc }) => {
      seen.push(runsOf(doc));
      return runsOf(doc) >= 2 ? null : increment({ doc, beads: "" });
    });
    expect(r.applied).toBe(false);
    // First on b's cache (1 run), which would apply; the push loses; on fresh state (2 runs) it drops.
    expect(seen).toEqual([1, 2]);
    expect(await gh.head(BRANCH)).toBe(head);
    expect(r.commit).toBeUndefined();
  });

  it("loses no update when stores race: 3 stores x 8 increments give 24 runs in 24 commits", async () => {
    const stores = [0, 1, 2].map(() => makeStore({ sleep: undefined, random: Math.random }));
    await Promise.all(
      stores.map(async (s) => {
        for (let i = 0; i < 8; i++) await s.update(increment);
      }),
    );
    const final = await makeStore().read();
    expect(runsOf(final.doc)).toBe(24);
    expect(await gh.commitCount(BRANCH)).toBe(24);
    expect(stores.reduce((n, s) => n + s.stats().pushes - s.stats().conflicts, 0)).toBe(24);
  }, 180_000); // 24 racing pushes with real backoff, each a few git processes: past 60 s on a loaded 2-core machine

  it("reports a corrupt state.json with StateCorruptError and never overwrites it", async () => {
    await gh.push(BRANCH, { [STATE_PATH]: "{ not json", [BEADS_PATH]: "" }, "break it");
    const head = await gh.head(BRANCH);
    const store = makeStore();
    await expect(store.read()).rejects.toBeInstanceOf(StateCorruptError);
    await expect(store.read()).rejects.toThrow(`${OWNER}/${REPO}@${BRANCH}:${STATE_PATH} is unreadable`);
    await expect(store.update(increment)).rejects.toBeInstanceOf(StateCorruptError);
    expect(await gh.head(BRANCH)).toBe(head);
    expect((await gh.files(BRANCH))[STATE_PATH]).toBe("{ not json");
  });

  it("names the repository, never the token, when the server refuses the token", async () => {
    await makeStore().update(increment);
    const bad = "ghp_0123456789abcdef0123456789abcdef";
    const badStore = makeStore({ token: () => bad });
    const err = (await badStore.read().then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(err).toBeInstanceOf(StateGitError);
    expect(err.message).toContain(`${OWNER}/${REPO}@${BRANCH}`);
    expect(err).toMatchObject({ status: 401, operation: "fetch" });
    expect(err.message).not.toContain(bad);
    expect(err.message).not.toContain(Buffer.from(`x-access-token:${bad}`).toString("base64"));

    // A reader can fetch, but its push is refused: a clear error, not a retry loop.
    gh.emulator.addCollaborator(`${OWNER}/${REPO}`, "reader", "read");
    const readerToken = gh.emulator.userToken("reader");
    const reader = makeStore({ token: () => readerToken });
    expect(runsOf((await reader.read()).doc)).toBe(1);
    const denied = (await reader.update(increment).then(
      () => undefined,
      (e: unknown) => e,
    )) as Error;
    expect(denied).toBeInstanceOf(StateGitError);
    expect(denied.message).toMatch(/git push failed: .*403/);
    expect(denied).toMatchObject({ status: 403, operation: "push" });
    expect(denied.message).not.toContain(readerToken);
    expect(reader.stats().conflicts).toBe(0);
  });

  it("lists history newest first without the write trailer", async () => {
    const store = makeStore();
    expect(await store.history(10)).toEqual([]);
    for (const m of ["one", "two", "three"])
      await store.update(({ doc }) => ({ ...increment({ doc, beads: "" })!, message: m }));
    const h = await makeStore().history(10);
    expect(h.map((c) => c.message)).toEqual(["three", "two", "one"]);
    expect(h[0]!.sha).toBe(await gh.head(BRANCH));
    expect(h[0]!.date).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect((await store.history(2)).map((c) => c.message)).toEqual(["three", "two"]);
  });
});
