// Claims by ref on the git state store, against the offline GitHub's real git server: a worker claims a
// dispatched task by creating a ref of its own for that dispatch, no commit on the state branch's head
// (core/claims.ts). One claimer wins each dispatch, by ref or by commit; every reader sees the claim at
// once; the next commit carries it and a later one deletes the ref.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { execa } from "execa";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CLAIM_REF_GRACE_MS, type ClaimRecord } from "../../src/core/claims.ts";
import { claimLease, dispatchHolder } from "../../src/core/leases.ts";
import { emptyStateDoc, type FleetStateDoc, recordLedger } from "../../src/core/state-doc.ts";
import { createGitStateStore } from "../../src/state/git-store.ts";
import { dispatchedTask } from "../support/dispatched-task.ts";
import { type Backend, OWNER, REPO, startEmulatorBackend } from "./backends.ts";

const t0 = new Date("2026-03-01T10:00:00Z");
const PREFIX = "refs/fleet/claims/fleet/state/";

describe("claims by ref on the git state store (emulator)", () => {
  let gh: Backend & { emulator: GitHubEmulator };
  let dirs: string;
  let cacheN = 0;
  let now = t0.getTime();
  beforeEach(async () => {
    gh = await startEmulatorBackend();
    dirs = await mkdtemp(join(tmpdir(), "fleet-claim-refs-"));
    now = t0.getTime();
  });
  afterEach(async () => {
    await gh.close();
    await rm(dirs, { recursive: true, force: true });
  });

  const makeStore = (base = gh.emulator.url) =>
    createGitStateStore({
      url: `${base}/${OWNER}/${REPO}.git`,
      token: () => gh.emulator.userToken("maintainer"),
      owner: OWNER,
      repo: REPO,
      cacheDir: join(dirs, `cache-${++cacheN}`),
      sleep: async () => {},
      random: () => 0.5,
      clock: () => new Date(now),
    });
  const bareGit = async (...args: string[]) =>
    (await execa("git", ["-C", join(gh.emulator.dataDir, OWNER, `${REPO}.git`), ...args])).stdout.trim();
  const claimRefs = async () =>
    (await bareGit("for-each-ref", "--format=%(refname)", PREFIX)).split("\n").filter(Boolean);
  const head = () => bareGit("rev-parse", "refs/heads/fleet/state");

  /** `n` tasks dispatched at t0, waiting for a worker. */
  const dispatch = (n: number) => (doc: FleetStateDoc) => {
    const out = { ...doc, tasks: { ...doc.tasks } };
    for (let i = 1; i <= n; i++) out.tasks[`fl-${i}`] = dispatchedTask(i, t0);
    return { doc: out, message: `dispatch ${n}` };
  };
  const claimBy =
    (holder: string, task = "fl-1") =>
    (doc: FleetStateDoc): ClaimRecord | null => {
      const lease = doc.tasks[task]?.lease;
      if (!lease || lease.holder !== dispatchHolder("local")) return null;
      return {
        task,
        dispatchedAt: lease.acquiredAt,
        holder,
        at: new Date(now).toISOString(),
        ttlMs: 600_000,
        startIn: "running",
      };
    };
  const count: (doc: FleetStateDoc) => { doc: FleetStateDoc; message: string } = (doc) => ({
    doc: recordLedger(doc, { day: "2026-03-01", coder: "claude", usage: { input: 1 } }),
    message: "count a run",
  });

  it("claims without a commit: one ref push, the head unmoved, every reader sees it, no webhook", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(2)(doc));
    const before = await head();
    await gh.emulator.waitForDeliveries();
    const pushesBefore = gh.emulator.deliveries().filter((d) => d.event === "push").length;

    const worker = makeStore();
    await worker.read();
    const mark = gh.emulator.gitRequests.mark();
    const claimed = await worker.claim!(claimBy("w1"));
    expect(claimed.applied).toBe(true);
    expect(claimed.snapshot.doc.tasks["fl-1"]).toMatchObject({
      state: "running",
      lease: { holder: "w1", slot: 1 },
    });
    // Decided on the state just read; the push is the advertisement and the pack.
    expect(gh.emulator.gitRequests.counts({ since: mark })).toEqual({ total: 2, fetches: 0, pushes: 2 });
    expect(await head()).toBe(before);
    expect(await claimRefs()).toEqual([`${PREFIX}fl-1/${t0.getTime()}`]);
    // Its commit sits on the claims' root, the same commit in every repository (an empty tree, Fleet's
    // identity, "Fleet claims", 2100-01-01): fetches find it in common.
    const root = await bareGit("rev-parse", `${PREFIX}fl-1/${t0.getTime()}^`);
    expect(root).toBe("1e18dca13a8e2e266e84c8d15d0f7aa9c2789d18");
    expect(await bareGit("rev-parse", `${root}^{tree}`)).toBe("4b825dc642cb6eb9a060e54bf8d69288fbee4904");

    // Another process sees the claim as if committed; the app's own cached store too, on its next read.
    expect((await makeStore().read()).doc.tasks["fl-1"]?.lease?.holder).toBe("w1");
    expect((await app.read()).doc.tasks["fl-1"]).toMatchObject({ state: "running", lease: { holder: "w1" } });
    // GitHub sends push webhooks for branches and tags only.
    await gh.emulator.waitForDeliveries();
    expect(gh.emulator.deliveries().filter((d) => d.event === "push")).toHaveLength(pushesBefore);
  });

  it("one winner per dispatch among claims by ref and by commit racing from separate processes", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(1)(doc));
    const byRef = [makeStore(), makeStore(), makeStore()];
    const byCommit = makeStore();
    await Promise.all([...byRef.map((s) => s.read()), byCommit.read()]);
    const results = await Promise.all([
      ...byRef.map((s, i) =>
        s.claim!(claimBy(`ref-${i}`)).then((r) => ({ who: `ref-${i}`, applied: r.applied })),
      ),
      byCommit
        .update(({ doc }) =>
          claimLease(doc, "fl-1", { holder: "commit", now: new Date(now), ttlMs: 600_000 }),
        )
        .then((r) => ({ who: "commit", applied: r.applied })),
    ]);
    const winners = results.filter((r) => r.applied).map((r) => r.who);
    expect(winners).toHaveLength(1);
    // Every process, whichever way it reads, sees that one winner.
    for (const s of [...byRef, byCommit, makeStore()])
      expect((await s.read()).doc.tasks["fl-1"]?.lease?.holder).toBe(winners[0]);
    // Whichever way it was claimed, the dispatch has its ref (a commit's claim creates it in the same push).
    expect(await claimRefs()).toEqual([`${PREFIX}fl-1/${t0.getTime()}`]);
  });

  it("the next commit carries the claims; a later push deletes their refs once the grace has passed", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(3)(doc));
    const worker = makeStore();
    expect((await worker.claim!(claimBy("w1", "fl-1"))).applied).toBe(true);
    expect((await worker.claim!(claimBy("w1", "fl-2"))).applied).toBe(true);

    // The app writes something else: the claims it read go into the document. (A writer that has not
    // read since leaves them as refs; they still count, see the next test.)
    await app.read();
    await app.update(({ doc }) => count(doc));
    const files = await gh.files("fleet/state");
    const written = JSON.parse(files[".fleet/state.json"]!) as FleetStateDoc;
    expect(written.tasks["fl-1"]?.lease?.holder).toBe("w1");
    expect(written.tasks["fl-2"]?.lease?.holder).toBe("w1");
    expect(written.tasks["fl-3"]?.lease?.holder).toBe(dispatchHolder("local"));
    expect(await claimRefs()).toHaveLength(2);

    // Within the grace the refs stay (a reader may still act on a state from before the claims).
    now += CLAIM_REF_GRACE_MS - 1000;
    await app.update(({ doc }) => count(doc));
    expect(await claimRefs()).toHaveLength(2);
    // Past it, the next push deletes them in the same atomic push; the claims stay in the document.
    now += 2000;
    const mark = gh.emulator.gitRequests.mark();
    await app.update(({ doc }) => count(doc));
    expect(gh.emulator.gitRequests.counts({ since: mark }).pushes).toBe(2);
    expect(await claimRefs()).toEqual([]);
    for (const s of [app, worker, makeStore()]) {
      const doc = (await s.read()).doc;
      expect([doc.tasks["fl-1"]?.lease?.holder, doc.tasks["fl-2"]?.lease?.holder]).toEqual(["w1", "w1"]);
      expect(doc.ledger["2026-03-01"]?.claude?.runs).toBe(3);
    }
    // The worker's cache had the refs: its fetch dropped them too, so its next write wins at once.
    const conflicts = worker.stats().conflicts;
    expect((await worker.update(({ doc }) => count(doc))).retries).toBe(0);
    expect(worker.stats().conflicts).toBe(conflicts);
  });

  it("a writer that has not seen a claim cannot close the claimed dispatch: its push is refused and decided again", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(2)(doc));
    await app.read();
    expect((await makeStore().claim!(claimBy("w1"))).applied).toBe(true);
    const seen: string[] = [];
    // The app, on its cached state (no claim), would cancel a dispatch nobody has claimed yet.
    const cancelUnclaimed = ({ doc }: { doc: FleetStateDoc }) => {
      const t = doc.tasks["fl-1"]!;
      seen.push(t.lease?.holder ?? "none");
      if (t.lease?.holder !== dispatchHolder("local")) return null;
      const { lease: _l, ...rest } = t;
      return {
        doc: { ...doc, tasks: { ...doc.tasks, "fl-1": { ...rest, state: "cancelled" as const } } },
        message: "cancel fl-1",
      };
    };
    const r = await app.update(cancelUnclaimed);
    expect(seen).toEqual([dispatchHolder("local"), "w1"]);
    expect(r.applied).toBe(false);
    expect((await makeStore().read()).doc.tasks["fl-1"]).toMatchObject({
      state: "running",
      lease: { holder: "w1" },
    });
    // The other dispatch closes by commit as before, and gets its ref (a marker): no claim can take it after.
    await app.update(cancelOther);
    const late = await makeStore().claim!(claimBy("w2", "fl-2"));
    expect(late.applied).toBe(false);
    expect(await claimRefs()).toEqual([`${PREFIX}fl-1/${t0.getTime()}`, `${PREFIX}fl-2/${t0.getTime()}`]);
  });

  it("a fetch whose advertisement listed a claim ref deleted before its pack request still reads the state", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(1)(doc));
    expect((await makeStore().claim!(claimBy("w1"))).applied).toBe(true);
    await app.read();
    now += CLAIM_REF_GRACE_MS + 1000;
    await app.update(({ doc }) => count(doc)); // carries the claim; its ref stays (not settled on the base)
    expect(await claimRefs()).toHaveLength(1);
    // A reader's fetch is held between the ref advertisement and its pack request, while the app's
    // next push deletes the ref: the claim commit it asks for is then in no ref at all.
    let releasePack!: () => void;
    const packHeld = new Promise<void>((r) => {
      releasePack = r;
    });
    let sawPack!: () => void;
    const packAsked = new Promise<void>((r) => {
      sawPack = r;
    });
    let held = 0;
    const target = new URL(gh.emulator.url);
    const proxy = createServer((req, res) => {
      const hold = req.method === "POST" && req.url?.endsWith("/git-upload-pack") && held++ === 0;
      const forward = () => {
        const up = request(
          {
            host: target.hostname,
            port: target.port,
            path: req.url,
            method: req.method,
            headers: req.headers,
          },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        req.pipe(up);
      };
      if (!hold) return forward();
      sawPack();
      void packHeld.then(forward);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const reader = makeStore(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
      const reading = reader.read();
      await packAsked;
      await app.update(({ doc }) => count(doc));
      expect(await claimRefs()).toEqual([]);
      releasePack();
      const doc = (await reading).doc;
      expect(doc.tasks["fl-1"]?.lease?.holder).toBe("w1");
      expect(held).toBeGreaterThan(1);
    } finally {
      releasePack();
      await new Promise((r) => proxy.close(r));
    }
  });

  it("a dispatch reopened by a revert under its close's marker is claimed again, the marker replaced", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(2)(doc));
    const open = (await gh.files("fleet/state"))[".fleet/state.json"]!;
    await app.update(cancelOther);
    expect(await claimRefs()).toEqual([`${PREFIX}fl-2/${t0.getTime()}`]);
    const marker = await bareGit("rev-parse", `${PREFIX}fl-2/${t0.getTime()}`);
    // Someone restores the state from before the cancel (a revert), marker and all still there.
    await gh.push(
      "fleet/state",
      { ...(await gh.files("fleet/state")), ".fleet/state.json": open },
      "Revert cancel",
    );
    const worker = makeStore();
    // A marker is replaced only once seen in an earlier read than the deciding one (a ref advertisement
    // is no snapshot: a close's marker may show before its commit): the first poll's claim is refused.
    expect((await worker.claim!(claimBy("w1", "fl-2"))).applied).toBe(false);
    await worker.read({ why: "poll" });
    const claimed = await worker.claim!(claimBy("w1", "fl-2"));
    expect(claimed.applied).toBe(true);
    expect(await bareGit("rev-parse", `${PREFIX}fl-2/${t0.getTime()}`)).not.toBe(marker);
    expect((await makeStore().read()).doc.tasks["fl-2"]?.lease?.holder).toBe("w1");
  });

  it("a cache that first read the branch shallow fetches a claim without the branch's history", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(1)(doc));
    for (let i = 0; i < 30; i++) await app.update(({ doc }) => count(doc));
    // A worker reads; the branch moves on; a fresh process reads it (shallow: the head alone).
    const worker = makeStore();
    await worker.read();
    await app.update(({ doc }) => count(doc));
    const fresh = makeStore();
    const freshCache = join(dirs, `cache-${cacheN}`);
    await fresh.read();
    // The worker claims on the state it read, older than the fresh cache's first read.
    expect((await worker.claim!(claimBy("w1"))).applied).toBe(true);
    expect((await fresh.read()).doc.tasks["fl-1"]?.lease?.holder).toBe("w1");
    // The head, the claim and the claims' common root: not the 31 commits under the head.
    const commits = Number((await execa("git", ["-C", freshCache, "rev-list", "--count", "--all"])).stdout);
    expect(commits).toBeLessThanOrEqual(4);
  });

  it("a read that brings new claims and a new head costs two git requests, also once its cache's claim refs were deleted", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(4)(doc));
    const reader = makeStore();
    await reader.read();
    const twoRequests = async (what: string) => {
      const mark = gh.emulator.gitRequests.mark();
      await reader.read();
      expect({ what, ...gh.emulator.gitRequests.counts({ since: mark }) }).toEqual({
        what,
        total: 2,
        fetches: 2,
        pushes: 0,
      });
    };
    expect((await makeStore().claim!(claimBy("w1", "fl-1"))).applied).toBe(true);
    await app.read();
    await app.update(({ doc }) => count(doc));
    await twoRequests("a claim and a commit");
    // The claim's ref is deleted; the reader's copy of it goes at its next fetch.
    now += CLAIM_REF_GRACE_MS + 1000;
    await app.update(({ doc }) => count(doc));
    await app.update(({ doc }) => count(doc));
    expect(await claimRefs()).toEqual([]);
    await twoRequests("the ref deleted");
    // Its cache now holds no claim ref: a new claim (on the same root) still costs two.
    expect((await makeStore().claim!(claimBy("w2", "fl-2"))).applied).toBe(true);
    await app.update(({ doc }) => count(doc));
    await twoRequests("a claim after the cache had none");
  });

  /** The git requests of `writer`'s update after `other` moved the branch: it loses the race first. */
  const lostRace = async (writer: ReturnType<typeof makeStore>, other: ReturnType<typeof makeStore>) => {
    await writer.read();
    now += 1000;
    await other.update(({ doc }) => count(doc));
    const mark = gh.emulator.gitRequests.mark();
    now += 1000;
    expect(await writer.update(({ doc }) => count(doc))).toMatchObject({ applied: true, retries: 1 });
    return gh.emulator.gitRequests.entries
      .filter((e) => e.seq > mark)
      .map((e) => `${e.method} ${e.path.replace(/^.*\.git\//, "")}`);
  };
  // Refused by the advertisement alone (the lease), fetched in one round of "have"s, pushed. Before: 3
  // requests for the fetch (16 "have"s, the refused commit among them and the branch not).
  const ONE_ROUND = [
    "GET info/refs",
    "GET info/refs",
    "POST git-upload-pack",
    "GET info/refs",
    "POST git-receive-pack",
  ];

  it("a write that lost the race fetches in two git requests, with 20 claim refs and a long history in its cache", async () => {
    const app = makeStore();
    const writer = makeStore();
    await app.update(({ doc }) => dispatch(30)(doc));
    // Claims by ref: each a commit of its own the writer's cache holds (their refs listed by the server).
    for (let i = 1; i <= 20; i++) {
      now += 1000;
      const claimer = i % 2 ? app : writer;
      expect((await claimer.claim!(claimBy(`w${i}`, `fl-${i}`))).applied).toBe(true);
    }
    // A claim the server refused (made first by another since the writer read): a commit it lacks.
    await writer.read();
    expect((await app.claim!(claimBy("first", "fl-21"))).applied).toBe(true);
    expect((await writer.claim!(claimBy("late", "fl-21"))).applied).toBe(false);
    for (let i = 0; i < 40; i++) {
      now += 1000;
      await (i % 2 ? app : writer).update(({ doc }) => count(doc));
    }
    expect(await lostRace(writer, app)).toEqual(ONE_ROUND);
    expect(await lostRace(writer, app)).toEqual(ONE_ROUND);
    const doc = (await makeStore().read()).doc;
    expect([doc.tasks["fl-20"]?.lease?.holder, doc.tasks["fl-21"]?.lease?.holder]).toEqual(["w20", "first"]);
  });

  it("a write that lost the race fetches in two git requests where no claim was ever made", async () => {
    const app = makeStore();
    const writer = makeStore();
    await app.update(({ doc }) => dispatch(1)(doc));
    for (let i = 0; i < 40; i++) {
      now += 1000;
      await (i % 2 ? app : writer).update(({ doc }) => count(doc));
    }
    expect(await lostRace(writer, app)).toEqual(ONE_ROUND);
  });

  it("a claim of a dispatch that is no longer open is refused, and a stale claim ref applies to nothing", async () => {
    const app = makeStore();
    await app.update(({ doc }) => dispatch(1)(doc));
    const first = makeStore();
    expect((await first.claim!(claimBy("w1"))).applied).toBe(true);
    const late = makeStore();
    // Decided on a state where the dispatch is already claimed: no claim is attempted.
    expect((await late.claim!(claimBy("w2"))).applied).toBe(false);
    // The same ref made by someone else first: the push is refused, nothing applied.
    const forced = await late.claim!((doc) => ({ ...claimBy("w2")(emptyDispatch(doc))!, holder: "w2" }));
    expect(forced.applied).toBe(false);
    expect(forced.snapshot.doc.tasks["fl-1"]?.lease?.holder).toBe("w1");
  });
});

function cancelOther({ doc }: { doc: FleetStateDoc }) {
  const { lease: _l, ...rest } = doc.tasks["fl-2"]!;
  return {
    doc: { ...doc, tasks: { ...doc.tasks, "fl-2": { ...rest, state: "cancelled" as const } } },
    message: "cancel fl-2",
  };
}

/** The document as if the task were still waiting (to make a claim decision on state that is out of date). */
function emptyDispatch(doc: FleetStateDoc): FleetStateDoc {
  const base = emptyStateDoc();
  const t = doc.tasks["fl-1"]!;
  return {
    ...base,
    tasks: { "fl-1": { ...t, state: "dispatched", lease: { ...t.lease!, holder: dispatchHolder("local") } } },
  };
}
