import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FleetStateDoc, recordLedger } from "../../src/core/state-doc.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import type { Mutation } from "../../src/state/store.ts";
import { OWNER, REPO, startEmulatorBackend } from "./backends.ts";

// What only the REST transport does: requests by route, one-request writes, conditional reads. The
// engine's behaviour on this transport is tested in cas-store.test.ts.
describe("GitHub state store: REST requests (emulator)", () => {
  let gh: Awaited<ReturnType<typeof startEmulatorBackend>>;
  beforeEach(async () => {
    gh = await startEmulatorBackend();
  });
  afterEach(async () => {
    await gh.close();
  });

  const noSleep = async () => {};
  const makeStore = (extra: Partial<Parameters<typeof createGitHubStateStore>[0]> = {}) =>
    createGitHubStateStore({
      github: githubOverOctokit(gh.octokit()),
      owner: OWNER,
      repo: REPO,
      sleep: noSleep,
      random: () => 0.5,
      ...extra,
    });

  const increment: Mutation = ({ doc }) => ({
    doc: recordLedger(doc, { day: "2026-01-01", coder: "claude", usage: { input: 1 } }),
    message: "count a run",
  });
  const runsOf = (doc: FleetStateDoc) => doc.ledger["2026-01-01"]?.claude?.runs ?? 0;

  it("creates the state branch with a tree, a commit and a ref, after the one read that found no branch", async () => {
    const store = makeStore();
    await store.read();
    await store.update(increment);
    expect(store.stats().byRoute).toMatchObject({
      "POST /repos/{owner}/{repo}/git/trees": 1,
      "POST /repos/{owner}/{repo}/git/commits": 1,
      "POST /repos/{owner}/{repo}/git/refs": 1,
    });
  });

  it("a single-file change is one request when nobody else wrote", async () => {
    const store = makeStore();
    await store.update(increment);
    store.resetStats();
    const r = await store.update(increment);
    expect(r.retries).toBe(0);
    expect(store.stats().requests).toBe(1);
    expect(store.stats().byRoute["PUT /repos/{owner}/{repo}/contents/{path}"]).toBe(1);
  });

  it("a second read with no change costs one 304", async () => {
    const store = makeStore();
    await makeStore().update(increment);
    await store.read();
    store.resetStats();
    const again = await store.read();
    expect(runsOf(again.doc)).toBe(1);
    expect(store.stats()).toMatchObject({ requests: 1, notModified: 1 });
    // After another writer changes one file, the other file's read is a 304 too.
    await makeStore().update(increment);
    store.resetStats();
    expect(runsOf((await store.read()).doc)).toBe(2);
    expect(store.stats()).toMatchObject({ requests: 3, notModified: 1 });
  });

  // A one-file write's compare-and-swap is that file's sha: another writer's commit to the other file
  // may come between, and the new commit holds that writer's version. A two-file write after it must
  // read first, or it puts the cache's older file back over the other writer's change.
  it("a two-file write after a one-file write that another writer's commit came before keeps that writer's change", async () => {
    const a = makeStore();
    await a.update(increment);
    const line = (name: string) => `{"id":"${name}","title":"${name}","status":"open"}\n`;
    // Another writer changes the beads file alone.
    await makeStore().update(({ doc, beads }) => ({
      doc,
      beads: `${beads}${line("theirs")}`,
      message: "beads",
    }));
    // A changes the state file alone (its sha unchanged: the write lands), then both files.
    expect(await a.update(increment)).toMatchObject({ applied: true, retries: 0 });
    const r = await a.update(({ doc, beads }) => ({
      ...increment({ doc, beads })!,
      beads: `${beads}${line("ours")}`,
    }));
    expect(r.applied).toBe(true);
    const final = await makeStore().read();
    expect(final.beads).toContain(line("theirs"));
    expect(final.beads).toContain(line("ours"));
    expect(runsOf(final.doc)).toBe(3);
  });
});
