import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordLedger, StateCorruptError } from "../../src/core/state-doc.ts";
import { withFileLock } from "../../src/state/file-lock.ts";
import { createLocalStateStore, defaultFleetHome } from "../../src/state/local-store.ts";

const run = promisify(execFile);
let home: string;
beforeEach(async () => {
  home = await mkdtemp(join(tmpdir(), "fleet-home-"));
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

describe("local state store", () => {
  it("starts empty and is created on first write, with history", async () => {
    const store = createLocalStateStore({ home, clock: () => new Date("2026-01-01T00:00:00Z") });
    const first = await store.read();
    expect(first.version).toBe("");
    expect(first.doc.tasks).toEqual({});
    const r = await store.update(({ doc }) => ({
      doc: { ...doc, config: { max_concurrent: 5 } },
      message: "config set max_concurrent=5",
    }));
    expect(r.applied).toBe(true);
    expect(r.commit).toMatch(/^[0-9a-f]{64}$/);
    const again = await store.read();
    expect(again.doc.config.max_concurrent).toBe(5);
    expect(again.version).toBe(r.commit);
    expect(await store.history(10)).toEqual([
      { sha: r.commit, message: "config set max_concurrent=5", date: "2026-01-01T00:00:00.000Z" },
    ]);
    expect(JSON.parse(await readFile(join(home, "state/.fleet/state.json"), "utf8")).version).toBe(1);
  });

  it("drops a mutation that no longer applies and writes nothing", async () => {
    const store = createLocalStateStore({ home });
    const r = await store.update(() => null);
    expect(r.applied).toBe(false);
    expect(await store.history(10)).toEqual([]);
  });

  it("reports a corrupt or newer-version document and leaves it intact", async () => {
    const store = createLocalStateStore({ home });
    const path = join(home, "state/.fleet/state.json");
    await mkdir(join(home, "state/.fleet"), { recursive: true });
    await writeFile(path, '{"version": 1, "tasks": [');
    await expect(store.read()).rejects.toBeInstanceOf(StateCorruptError);
    await expect(store.update(({ doc }) => ({ doc, message: "x" }))).rejects.toThrow(
      /not valid JSON.*will not overwrite/,
    );
    expect(await readFile(path, "utf8")).toBe('{"version": 1, "tasks": [');
    await writeFile(path, '{"version": 2}');
    await expect(store.read()).rejects.toThrow(/newer Fleet.*upgrade Fleet/);
  });

  it("defaults $FLEET_HOME to ~/.fleet", () => {
    expect(defaultFleetHome({ FLEET_HOME: "/x" })).toBe("/x");
    expect(defaultFleetHome({})).toMatch(/\.fleet$/);
  });

  it("breaks a lock left by a dead process", async () => {
    await mkdir(join(home, "state"), { recursive: true });
    // pid 2^22+1 is above Linux's pid_max default and cannot be alive.
    await writeFile(join(home, "state/.lock"), `${2 ** 22 + 1} 0 dead\n`);
    const store = createLocalStateStore({ home, lockTimeoutMs: 5_000 });
    const r = await store.update(({ doc }) => ({
      doc: { ...doc, config: { a: 1 } },
      message: "after stale lock",
    }));
    expect(r.applied).toBe(true);
  });

  it("serializes critical sections within one process", async () => {
    const lock = join(home, "l.lock");
    let inside = 0;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        withFileLock(lock, async () => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          await new Promise((r) => setTimeout(r, 1));
          inside--;
        }),
      ),
    );
    expect(maxInside).toBe(1);
  });

  it("loses no update under two concurrent processes", async () => {
    const script = join(import.meta.dirname, "fixtures/local-increment.ts");
    const tsx = join(process.cwd(), "node_modules/.bin/tsx");
    const n = 40;
    await Promise.all(["a", "b"].map((who) => run(tsx, [script, home, String(n), who])));
    const store = createLocalStateStore({ home });
    const { doc } = await store.read();
    expect(doc.ledger["2026-01-01"]?.bench?.runs).toBe(2 * n);
    expect(doc.ledger["2026-01-01"]?.bench?.usage.input).toBe(2 * n);
    expect((await store.history(1000)).length).toBe(2 * n);
  });

  it("records ledger totals", () => {
    const doc = recordLedger(
      recordLedger(
        { version: 1, config: {}, tasks: {}, ledger: {} },
        { day: "d", coder: "claude", usage: { input: 5 }, costUsd: 0.5 },
      ),
      { day: "d", coder: "claude", usage: { output: 2 }, costUsd: null },
    );
    expect(doc.ledger.d?.claude).toEqual({
      runs: 2,
      usage: { input: 5, output: 2, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
      costUsd: 0.5,
    });
  });
});
