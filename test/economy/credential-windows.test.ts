import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { emptyStateDoc } from "../../src/core/state-doc.ts";
import {
  credentialRows,
  storedWindows,
  WindowBook,
  writeWindows,
} from "../../src/economy/credential-windows.ts";
import { recordCooling } from "../../src/economy/credentials.ts";
import { createCredentialRotation } from "../../src/economy/rotation.ts";
import { renderCredentialWindowsText } from "../../src/render/credential-windows.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { cliEnv, fleet, tempGitRepo } from "../cli/cli-helpers.ts";

const NOW = new Date("2026-01-01T10:30:00.000Z");
const anthropic = (remaining: number) => ({
  "anthropic-ratelimit-tokens-limit": "100000",
  "anthropic-ratelimit-tokens-remaining": String(remaining),
  "anthropic-ratelimit-tokens-reset": "2026-01-01T10:31:00Z",
});

describe("credential windows: recorded, drawn by headroom, kept in the state", () => {
  it("a book records what the gateway saw; the state keeps it beside cooling times; rows and text show it", () => {
    const book = new WindowBook();
    book.record("claude", "KEY_A", { headers: anthropic(30_000), tokens: 70_000 }, NOW);
    book.record("claude", "KEY_B", { headers: anthropic(95_000), tokens: 5_000 }, NOW);
    let doc = writeWindows(emptyStateDoc(), "claude", ["KEY_A", "KEY_B", "KEY_C"], book);
    doc = recordCooling(doc, "claude", "KEY_C", "2026-01-01T11:00:00.000Z", NOW);
    const config = defaultFleetConfig();
    config.coders.claude!.credentials = ["KEY_A", "KEY_B", "KEY_C"];
    const rows = credentialRows(doc, config).filter((r) => r.coder === "claude");
    expect(rows.map((r) => [r.name, r.coolingUntil, r.windows?.windows.tokens?.remaining])).toEqual([
      ["KEY_A", undefined, 30_000],
      ["KEY_B", undefined, 95_000],
      ["KEY_C", "2026-01-01T11:00:00.000Z", undefined],
    ]);
    expect(renderCredentialWindowsText(rows, NOW)).toBe(
      [
        "claude  KEY_A  open  (Fleet this hour: 70k tokens, 1 requests)",
        "    tokens 70% used (30k of 100k left), resets 2026-01-01T10:31:00.000Z",
        "claude  KEY_B  open  (Fleet this hour: 5k tokens, 1 requests)",
        "    tokens 5% used (95k of 100k left), resets 2026-01-01T10:31:00.000Z",
        "claude  KEY_C  cooling until 2026-01-01T11:00:00.000Z  (Fleet this hour: 0 tokens, 0 requests)",
        "    no window reported by the provider yet",
      ].join("\n"),
    );
  });

  it("the hour's count adds every process's own: a restarted worker adds to it, writing again replaces only its own", () => {
    const first = new WindowBook("worker-1");
    for (let i = 0; i < 3; i++)
      first.record("claude", "KEY_A", { headers: anthropic(90_000), tokens: 1_000 }, NOW);
    let doc = writeWindows(emptyStateDoc(), "claude", ["KEY_A"], first);
    // The first worker is gone; the one started after it counts from nothing.
    const second = new WindowBook("worker-2");
    second.record("claude", "KEY_A", { headers: anthropic(80_000), tokens: 500 }, NOW);
    doc = writeWindows(doc, "claude", ["KEY_A"], second);
    expect(storedWindows(doc, "claude").KEY_A!.hour).toEqual({
      start: "2026-01-01T10:00:00.000Z",
      tokens: 3_500,
      requests: 4,
    });
    // Its next write counts its own requests once.
    second.record("claude", "KEY_A", { headers: anthropic(79_000), tokens: 500 }, NOW);
    doc = writeWindows(doc, "claude", ["KEY_A"], second);
    doc = writeWindows(doc, "claude", ["KEY_A"], second);
    expect(storedWindows(doc, "claude").KEY_A!.hour).toMatchObject({ tokens: 4_000, requests: 5 });
    // The next hour starts from what is counted in it.
    const later = new Date("2026-01-01T11:05:00.000Z");
    second.record("claude", "KEY_A", { headers: anthropic(99_000), tokens: 100 }, later);
    doc = writeWindows(doc, "claude", ["KEY_A"], second);
    expect(storedWindows(doc, "claude").KEY_A!.hour).toEqual({
      start: "2026-01-01T11:00:00.000Z",
      tokens: 100,
      requests: 1,
    });
    expect(Object.keys(storedWindows(doc, "claude").KEY_A!.hourBy ?? {})).toEqual(["worker-2"]);
  });

  it("a count stored before counts were kept by process stands as one process's", () => {
    const stored = {
      windows: {},
      hour: { start: "2026-01-01T10:00:00.000Z", tokens: 9_000, requests: 2_236 },
    };
    const book = new WindowBook("worker-3");
    for (let i = 0; i < 8; i++) book.record("claude", "KEY_A", { headers: {}, tokens: 10 }, NOW);
    expect(book.merge("claude", "KEY_A", stored)?.hour).toEqual({
      start: "2026-01-01T10:00:00.000Z",
      tokens: 9_080,
      requests: 2_244,
    });
  });

  it("the dashboard's credentials table shows each window's use and reset, and what Fleet sent this hour", async () => {
    const { dashboardBody } = await import("../../src/queue/dashboard.ts");
    const book = new WindowBook();
    book.record("claude", "ANTHROPIC_API_KEY", { headers: anthropic(8_000), tokens: 92_000 }, NOW);
    const doc = writeWindows(emptyStateDoc(), "claude", ["ANTHROPIC_API_KEY"], book);
    const body = dashboardBody("o/r", doc, defaultFleetConfig(), NOW);
    expect(body).toContain("| Coder | Credential | State | Windows (used, reset) | Fleet this hour |");
    expect(body).toContain(
      "| claude | `ANTHROPIC_API_KEY` | ⚠️ near a limit | tokens 92% used (8k of 100k left), resets 2026-01-01T10:31:00.000Z | 92k tokens, 1 requests |",
    );
  });

  it("a run draws the credential with the most headroom, not the first; a pool near its limits waits for the first reset", async () => {
    const home = await mkdtemp(join(tmpdir(), "fleet-windows-"));
    try {
      const store = createLocalStateStore({ home });
      const book = new WindowBook();
      const rotation = createCredentialRotation({
        store,
        coder: "claude",
        names: ["KEY_A", "KEY_B", "KEY_C"],
        secretOf: (n) => `sk-ant-${n}`,
        clock: () => NOW,
        fallbackSeconds: 60,
        book,
      });
      book.record("claude", "KEY_A", { headers: anthropic(40_000), tokens: 0 }, NOW);
      book.record("claude", "KEY_B", { headers: anthropic(80_000), tokens: 0 }, NOW);
      book.record("claude", "KEY_C", { headers: anthropic(50_000), tokens: 0 }, NOW);
      expect(await rotation.first()).toMatchObject({ kind: "credential", credential: { name: "KEY_B" } });
      // A running agent on KEY_A moves off it once a window is 90% full.
      expect(rotation.next("KEY_A")).toBeUndefined();
      book.record("claude", "KEY_A", { headers: anthropic(9_000), tokens: 0 }, NOW);
      expect(rotation.next("KEY_A")?.name).toBe("KEY_B");
      for (const k of ["KEY_B", "KEY_C"])
        book.record("claude", k, { headers: anthropic(5_000), tokens: 0 }, NOW);
      expect(await rotation.first()).toEqual({ kind: "all-cooling", resetAt: "2026-01-01T10:31:00.000Z" });
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });

  it("a request in flight counts until it is answered: two runs on KEY_A at 84% do not both send on it", async () => {
    const home = await mkdtemp(join(tmpdir(), "fleet-windows-"));
    try {
      const book = new WindowBook();
      const rotation = createCredentialRotation({
        store: createLocalStateStore({ home }),
        coder: "claude",
        names: ["KEY_A", "KEY_B"],
        secretOf: (n) => `sk-ant-${n}`,
        clock: () => NOW,
        fallbackSeconds: 60,
        book,
      });
      book.record("claude", "KEY_A", { headers: anthropic(16_000), tokens: 12_000 }, NOW);
      book.record("claude", "KEY_B", { headers: anthropic(100_000), tokens: 0 }, NOW);
      // The first run's request goes out on KEY_A (84% known) and is not answered yet.
      expect(rotation.next("KEY_A")).toBeUndefined();
      const release = book.hold("claude", "KEY_A", { tokens: 12_000, inputTokens: 2_000, outputTokens: 0 });
      expect(book.inFlight("claude", "KEY_A")).toEqual({
        requests: 1,
        tokens: 12_000,
        inputTokens: 2_000,
        outputTokens: 0,
      });
      // The second run's request: 84% + 12% in flight = 96%, so it goes on KEY_B.
      expect(rotation.next("KEY_A")?.name).toBe("KEY_B");
      // The answer failed (nothing recorded): released once; a second release does nothing.
      release();
      release();
      expect(book.inFlight("claude", "KEY_A").requests).toBe(0);
      expect(rotation.next("KEY_A")).toBeUndefined();
      // What is in flight is never written into the state document.
      book.hold("claude", "KEY_A", { tokens: 12_000, inputTokens: 2_000, outputTokens: 0 });
      const doc = writeWindows(emptyStateDoc(), "claude", ["KEY_A"], book);
      expect(storedWindows(doc, "claude").KEY_A?.windows.tokens?.remaining).toBe(16_000);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

describe("fleet tasks shows context pressure and credential windows (local mode)", () => {
  let repo: Awaited<ReturnType<typeof tempGitRepo>>;
  let home: string;
  beforeAll(async () => {
    repo = await tempGitRepo();
    home = await mkdtemp(join(tmpdir(), "fleet-windows-home-"));
  });
  afterAll(async () => {
    await repo?.cleanup();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it("prints a running task's context against its window, and each credential's windows", async () => {
    const env = cliEnv({ FLEET_HOME: home, ANTHROPIC_API_KEY: "sk-ant-windows-test-credential-0000" });
    const created = await fleet(["bd", "create", "--title", "T", "--description", "t", "--json"], {
      cwd: repo.dir,
      env,
    });
    expect(created.exitCode, created.stderr).toBe(0);
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const store = createLocalStateStore({ home });
    const book = new WindowBook();
    const now = new Date();
    book.record(
      "claude",
      "ANTHROPIC_API_KEY",
      {
        headers: {
          "anthropic-ratelimit-tokens-limit": "400000",
          "anthropic-ratelimit-tokens-remaining": "100000",
          "anthropic-ratelimit-tokens-reset": new Date(now.getTime() + 60_000).toISOString(),
        },
        tokens: 1234,
      },
      now,
    );
    await store.update(({ doc }) => {
      const task = doc.tasks[id]!;
      const running = {
        ...task,
        state: "running" as const,
        context: { tokens: 150_000, window: 200_000, at: now.toISOString() },
      };
      return {
        doc: writeWindows(
          { ...doc, tasks: { ...doc.tasks, [id]: running } },
          "claude",
          ["ANTHROPIC_API_KEY"],
          book,
        ),
        message: "test",
      };
    });
    const table = await fleet(["tasks"], { cwd: repo.dir, env });
    expect(table.stdout).toMatch(/CONTEXT/);
    expect(table.stdout).toContain("75% of 200k");
    const rows = JSON.parse((await fleet(["tasks", "--json"], { cwd: repo.dir, env })).stdout) as Array<{
      context?: unknown;
    }>;
    expect(rows[0]?.context).toMatchObject({ tokens: 150_000, window: 200_000, percent: 75 });
    const creds = await fleet(["tasks", "--credentials"], { cwd: repo.dir, env });
    expect(creds.exitCode, creds.stderr).toBe(0);
    expect(creds.stdout).toContain(
      "claude  ANTHROPIC_API_KEY  open  (Fleet this hour: 1.2k tokens, 1 requests)",
    );
    expect(creds.stdout).toMatch(/tokens 75% used \(100k of 400k left\), resets /);
    const asJson = JSON.parse(
      (await fleet(["tasks", "--credentials", "--json"], { cwd: repo.dir, env })).stdout,
    );
    expect(asJson.find((c: { name: string }) => c.name === "ANTHROPIC_API_KEY")).toMatchObject({
      coder: "claude",
      state: "open",
      windows: [{ window: "tokens", limit: 400_000, remaining: 100_000, usedPct: 75 }],
      fleetThisHour: { tokens: 1234, requests: 1 },
    });
  });
});
