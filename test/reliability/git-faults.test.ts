// Transient failures of git fetch and push (5xx, 429) against the emulator's git smart-HTTP routes:
// the git state store retries them with backoff and applies each write exactly once.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  GIT_INFO_REFS_ROUTE,
  GIT_RECEIVE_PACK_ROUTE,
  GIT_UPLOAD_PACK_ROUTE,
  type GitHubEmulator,
} from "@fleet/github-emulator";
import { execa } from "execa";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FleetStateDoc, recordLedger } from "../../src/core/state-doc.ts";
import { createGitStateStore, GIT_NETWORK_ATTEMPTS, StateGitError } from "../../src/state/git-store.ts";
import type { Mutation } from "../../src/state/store.ts";
import { type Backend, OWNER, REPO, startEmulatorBackend } from "../state/backends.ts";

const BRANCH = "fleet/state";
const INFO_REFS = `/${OWNER}/${REPO}.git/info/refs`;
const UPLOAD_PACK = `/${OWNER}/${REPO}.git/git-upload-pack`;
const RECEIVE_PACK = `/${OWNER}/${REPO}.git/git-receive-pack`;

describe("git state store under git smart-HTTP faults", () => {
  let gh: Backend & { emulator: GitHubEmulator };
  let dirs: string;
  let token: string;
  let cacheN = 0;
  let sleeps: number[];
  beforeEach(async () => {
    gh = await startEmulatorBackend();
    dirs = await mkdtemp(join(tmpdir(), "fleet-git-faults-"));
    token = gh.emulator.userToken("maintainer");
    sleeps = [];
  });
  afterEach(async () => {
    await gh.close();
    await rm(dirs, { recursive: true, force: true });
  });

  const makeStore = (extra: Partial<Parameters<typeof createGitStateStore>[0]> = {}) =>
    createGitStateStore({
      url: `${gh.emulator.url}/${OWNER}/${REPO}.git`,
      token: () => token,
      owner: OWNER,
      repo: REPO,
      cacheDir: join(dirs, `cache-${++cacheN}`),
      sleep: async (ms) => {
        sleeps.push(ms);
      },
      random: () => 0.5,
      // No pacing sleeps: `sleeps` holds only the backoff between tries.
      pacing: 0,
      ...extra,
    });
  const increment: Mutation = ({ doc }) => ({
    doc: recordLedger(doc, { day: "2026-01-01", coder: "claude", usage: { input: 1 } }),
    message: "count a run",
  });
  const runsOf = (doc: FleetStateDoc) => doc.ledger["2026-01-01"]?.claude?.runs ?? 0;
  const gitSince = (mark: number) => gh.emulator.gitRequests.entries.filter((e) => e.seq > mark);
  const statuses = (mark: number, path: string) =>
    gitSince(mark)
      .filter((e) => e.path === path)
      .map((e) => e.status);

  it("retries a 503 on upload-pack and 502s on receive-pack, and applies the write exactly once", async () => {
    await makeStore().update(increment);
    expect(await gh.commitCount(BRANCH)).toBe(1);
    const mark = gh.emulator.gitRequests.mark();
    gh.emulator.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, status: 502, times: 2 });
    gh.emulator.faults.inject({ route: GIT_UPLOAD_PACK_ROUTE, status: 503, times: 1 });

    // A fresh store fetches first (503, then fine), then pushes (502, 502, then fine).
    const store = makeStore();
    const r = await store.update(increment);
    expect(r.applied).toBe(true);
    expect(r.retries).toBe(0);
    expect(await gh.commitCount(BRANCH)).toBe(2);
    expect(await gh.head(BRANCH)).toBe(r.commit);
    expect(runsOf((await makeStore().read()).doc)).toBe(2);

    // The faults were really answered, and each faulted route later succeeded.
    expect(statuses(mark, UPLOAD_PACK)[0]).toBe(503);
    expect(statuses(mark, UPLOAD_PACK).slice(1)).toContain(200);
    expect(statuses(mark, RECEIVE_PACK)).toEqual([502, 502, 200]);
    expect(store.stats()).toMatchObject({ conflicts: 0, transientRetries: 3 });
    expect(sleeps).toHaveLength(3);
  });

  it("waits at least a second after a rate limit (429), then succeeds", async () => {
    const store = makeStore();
    await store.update(increment);
    const mark = gh.emulator.gitRequests.mark();
    gh.emulator.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, status: 429, retryAfter: 1, times: 1 });
    const r = await store.update(increment);
    expect(r.applied).toBe(true);
    expect(statuses(mark, RECEIVE_PACK)).toEqual([429, 200]);
    expect(sleeps.filter((ms) => ms >= 1_000)).toHaveLength(1);
    expect(runsOf((await makeStore().read()).doc)).toBe(2);
  });

  it("re-applies on fresh state when the branch moved while the push failed, once", async () => {
    let onToken: (() => Promise<void>) | undefined;
    const store = makeStore({
      token: async () => {
        const hook = onToken;
        onToken = undefined;
        await hook?.();
        return token;
      },
    });
    await store.update(increment);
    gh.emulator.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, status: 502, times: 1 });
    // The push (first token) fails; when the store looks at the branch (second token), another writer moved it.
    let calls = 0;
    const other = makeStore();
    const moveOnSecond = async () => {
      calls++;
      if (calls === 2) await other.update(increment);
      else onToken = moveOnSecond;
    };
    onToken = moveOnSecond;
    const r = await store.update(increment);
    expect(r).toMatchObject({ applied: true, retries: 1 });
    expect(runsOf(r.snapshot.doc)).toBe(3);
    expect(await gh.commitCount(BRANCH)).toBe(3);
    expect(store.stats().conflicts).toBe(1);
  });

  it("counts a push whose answer was lost as written, even once another writer built on it", async () => {
    const cacheDir = join(dirs, "landed-cache");
    let onToken: (() => Promise<void>) | undefined;
    const store = makeStore({
      cacheDir,
      token: async () => {
        const hook = onToken;
        onToken = undefined;
        await hook?.();
        return token;
      },
    });
    await store.update(increment);
    const before = (await gh.head(BRANCH))!;
    gh.emulator.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, status: 502, times: 1 });
    // The push (first token) is answered 502; before the store looks (second token), its commit lands
    // as if the server had taken it, and another writer adds a commit on top.
    let calls = 0;
    const land = async () => {
      calls++;
      if (calls !== 2) {
        onToken = land;
        return;
      }
      // The commit whose push was answered 502: the store keeps its last commit under refs/fleet/commit.
      const { stdout } = await execa("git", ["-C", cacheDir, "rev-parse", "refs/fleet/commit"]);
      const ours = [stdout.trim()];
      expect(ours[0]).toMatch(/^[0-9a-f]{40}$/);
      expect(ours[0]).not.toBe(before);
      await execa("git", [
        "-C",
        cacheDir,
        "push",
        "-q",
        join(gh.emulator.dataDir, OWNER, `${REPO}.git`),
        `${ours[0]}:refs/heads/${BRANCH}`,
      ]);
      await makeStore().update(increment);
    };
    onToken = land;
    const r = await store.update(increment);
    expect(r.applied).toBe(true);
    expect(await gh.parents(r.commit!)).toEqual([before]);
    // Ours and the other writer's: 3 runs in 3 commits, not a fourth re-applied one.
    expect(await gh.commitCount(BRANCH)).toBe(3);
    expect(runsOf((await makeStore().read()).doc)).toBe(3);
    expect(store.stats().conflicts).toBe(0);
  });

  it("gives up after a bounded number of tries with a transient StateGitError, leaving the branch alone", async () => {
    const store = makeStore();
    await store.update(increment);
    const head = await gh.head(BRANCH);
    const mark = gh.emulator.gitRequests.mark();
    gh.emulator.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, status: 503 });
    const err = await store.update(increment).then(
      () => undefined,
      (e: unknown) => e,
    );
    gh.emulator.faults.clear();
    expect(err).toBeInstanceOf(StateGitError);
    expect(err).toMatchObject({ operation: "push", status: 503, transient: true });
    expect(statuses(mark, RECEIVE_PACK)).toEqual(Array(GIT_NETWORK_ATTEMPTS).fill(503));
    expect(await gh.head(BRANCH)).toBe(head);
    expect(sleeps).toEqual([500, 1_000, 2_000, 4_000, 8_000].slice(0, GIT_NETWORK_ATTEMPTS - 1));
  });

  it("retries a refused connection, then reports it as transient", async () => {
    const store = makeStore({ url: "http://127.0.0.1:1/octo/widgets.git" });
    const err = await store.read().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StateGitError);
    expect(err).toMatchObject({ operation: "fetch", transient: true });
    expect(store.stats()).toMatchObject({
      fetches: GIT_NETWORK_ATTEMPTS,
      transientRetries: GIT_NETWORK_ATTEMPTS - 1,
    });
  });

  it("does not retry a refused token (401) or a missing repository (404)", async () => {
    await makeStore().update(increment);
    const bad = makeStore({ token: () => "ghp_0123456789abcdef0123456789abcdef" });
    let mark = gh.emulator.gitRequests.mark();
    await expect(bad.read()).rejects.toMatchObject({ status: 401, operation: "fetch", transient: false });
    expect(statuses(mark, INFO_REFS)).toEqual([401]);
    expect(gitSince(mark)).toHaveLength(1);
    expect(bad.stats().transientRetries).toBe(0);

    mark = gh.emulator.gitRequests.mark();
    gh.emulator.faults.inject({ route: GIT_INFO_REFS_ROUTE, status: 404, times: 3 });
    const store = makeStore();
    await expect(store.read()).rejects.toMatchObject({ status: 404, transient: false });
    expect(gitSince(mark).map((e) => e.status)).toEqual([404]);
    expect(sleeps).toEqual([]);
  });
});
