import { existsSync } from "node:fs";
import { mkdir, readdir, rm, utimes } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { recordLedger } from "../../src/core/state-doc.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import {
  createRepoStateStore,
  gitRemoteUrl,
  removeStaleCacheDirs,
  STATE_CACHE_ROOT,
  stateTransportFrom,
} from "../../src/state/repo-store.ts";
import { OWNER, REPO, startEmulatorBackend } from "./backends.ts";

describe("gitRemoteUrl", () => {
  it("maps github.com's API to github.com, GitHub Enterprise's /api/v3 to its host, and any other API root to its origin", () => {
    expect(gitRemoteUrl("https://api.github.com", "octo", "widgets")).toBe(
      "https://github.com/octo/widgets.git",
    );
    expect(gitRemoteUrl("https://ghe.example.com/api/v3/", "octo", "widgets")).toBe(
      "https://ghe.example.com/octo/widgets.git",
    );
    expect(gitRemoteUrl("http://127.0.0.1:4321", "octo-org", "w.js")).toBe(
      "http://127.0.0.1:4321/octo-org/w.js.git",
    );
  });
});

describe("stateTransportFrom", () => {
  it("defaults to git, takes api, and names the valid values for anything else", () => {
    expect(stateTransportFrom({})).toBe("git");
    expect(stateTransportFrom({ FLEET_STATE_TRANSPORT: " api " })).toBe("api");
    expect(() => stateTransportFrom({ FLEET_STATE_TRANSPORT: "rest" })).toThrow(/"rest".*git, api/);
  });
});

describe("the git store's cache repositories", () => {
  it("a cache folder removed or broken under a live store is made again at its next operation; a dead process's old folders are removed, a live one's kept", async () => {
    // A dead process's folder (no pid is that high) untouched for two hours, and pid 1's (alive).
    const hoursAgo = new Date(Date.now() - 2 * 60 * 60_000);
    const dead = join(STATE_CACHE_ROOT, `${OWNER}-${REPO}-${2 ** 23}-1-00ff00ff`);
    const alive = join(STATE_CACHE_ROOT, `${OWNER}-${REPO}-1-1-00ff00ff`);
    for (const dir of [dead, alive]) {
      await mkdir(dir, { recursive: true });
      await utimes(dir, hoursAgo, hoursAgo);
    }
    const gh = await startEmulatorBackend();
    try {
      const store = createRepoStateStore({
        github: githubOverOctokit(gh.octokit()),
        owner: OWNER,
        repo: REPO,
        transport: "git",
        pacing: 0,
      });
      let n = 0;
      const count = () =>
        store.update(({ doc }) => ({
          doc: recordLedger(doc, { day: "2026-01-01", coder: "claude", usage: { input: 1 } }),
          message: `count ${++n}`,
        }));
      expect((await count()).applied).toBe(true);
      const mine = (await readdir(STATE_CACHE_ROOT)).filter((d) =>
        d.startsWith(`${OWNER}-${REPO}-${process.pid}-`),
      );
      expect(mine).toHaveLength(1);
      const cache = join(STATE_CACHE_ROOT, mine[0]!);
      // Removed, as a cleaner of the temporary folder does; then left half there, as a removal cut short.
      await rm(cache, { recursive: true, force: true });
      await expect(count()).rejects.toThrow();
      expect((await count()).applied).toBe(true);
      await rm(join(cache, "objects"), { recursive: true, force: true });
      await rm(join(cache, "refs"), { recursive: true, force: true });
      await expect(count()).rejects.toThrow();
      expect((await count()).applied).toBe(true);
      expect((await store.read()).doc.ledger).toBeDefined();
      await removeStaleCacheDirs();
      expect(existsSync(dead)).toBe(false);
      expect(existsSync(alive)).toBe(true);
      expect(existsSync(cache)).toBe(true);
    } finally {
      await gh.close();
      await rm(alive, { recursive: true, force: true });
    }
  });
});
