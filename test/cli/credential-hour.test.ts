// What Fleet sent on a credential this hour survives a worker stopped with SIGTERM and a new worker
// started after it (`fleet tasks --credentials`), and a credential that is not set says so.

import type { ScriptTurn } from "@fleet/model-servers";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliEnv, fleet, fleetProcess, scriptedRunArgs, tempGitRepo, tempHome } from "./cli-helpers.ts";

const FLEET_YML = "plan_phase: false\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const KEY = "sk-ant-local-hour-credential-0000";

describe("credentials' hourly counts across worker restarts (local mode)", () => {
  let repo: Awaited<ReturnType<typeof tempGitRepo>>;
  let home: Awaited<ReturnType<typeof tempHome>>;
  let server: ScriptServer;
  beforeAll(async () => {
    repo = await tempGitRepo({ ".github/fleet.yml": FLEET_YML });
    home = await tempHome();
  });
  afterAll(async () => {
    await server?.stop();
    await repo?.cleanup();
    await home?.cleanup();
  });

  const credentials = async (env: Record<string, string>) => {
    const r = await fleet(["tasks", "--credentials", "--json"], { cwd: repo.dir, env });
    expect(r.exitCode, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Array<{
      coder: string;
      name: string;
      state: string;
      set?: boolean;
      fleetThisHour: { requests: number };
    }>;
  };

  it("a worker stopped with SIGTERM keeps its requests in the hour's count; the next worker adds to it", async () => {
    // Each turn appends a line (the worktree changes: no runaway), slowly enough to stop the worker mid-run.
    const turns: ScriptTurn[] = Array.from({ length: 16 }, (_, i) => ({
      toolUses: [
        { name: "Bash", input: { command: `sleep 0.3; echo ${i} >> LOG.md`, description: `line ${i}` } },
      ],
      usage: { input_tokens: 300, output_tokens: 10 },
    }));
    server = await startAnthropicScriptServer({
      turns: [...turns, { text: "Done.", usage: { input_tokens: 5, output_tokens: 2 } }],
    });
    const env = cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: KEY });
    const hourAtStart = new Date().getUTCHours();
    const created = await fleet(["bd", "create", "--title", "Log", "--description", "Write LOG.md."], {
      cwd: repo.dir,
      env,
    });
    expect(created.exitCode, created.stderr).toBe(0);

    const first = fleetProcess(
      scriptedRunArgs(server.url).filter((a) => a !== "--until-idle"),
      {
        cwd: repo.dir,
        env,
      },
    );
    for (let i = 0; i < 600 && server.played < 6; i++) await new Promise((r) => setTimeout(r, 100));
    expect(server.played).toBeGreaterThanOrEqual(6);
    first.kill("SIGTERM");
    const stopped = await first;
    expect(stopped.exitCode, String(stopped.stderr)).toBe(0);
    const sentBeforeStop = server.requests.length;
    const afterStop = (await credentials(env)).find((c) => c.name === "ANTHROPIC_API_KEY")!;
    // Every request answered before the stop is counted (one may have been cut off by it).
    expect(afterStop.fleetThisHour.requests).toBeGreaterThanOrEqual(sentBeforeStop - 1);

    const second = await fleet(scriptedRunArgs(server.url), { cwd: repo.dir, env });
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.stderr).toMatch(/pr-opened/);
    const after = (await credentials(env)).find((c) => c.name === "ANTHROPIC_API_KEY")!;
    // A new UTC hour starts a new count: the figures are compared within one hour only.
    if (new Date().getUTCHours() === hourAtStart) {
      expect(after.fleetThisHour.requests).toBeGreaterThanOrEqual(server.requests.length - 1);
      expect(after.fleetThisHour.requests).toBeLessThanOrEqual(server.requests.length);
    }
  }, 240_000);

  it("a credential that is not set in this environment shows as not set", async () => {
    const rows = await credentials(cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: KEY }));
    expect(rows.find((c) => c.name === "ANTHROPIC_API_KEY")).toMatchObject({ set: true });
    const unset = rows.filter((c) => c.name !== "ANTHROPIC_API_KEY");
    expect(unset.length).toBeGreaterThan(0);
    for (const row of unset) expect(row).toMatchObject({ set: false, state: "not-set" });
    const text = await fleet(["tasks", "--credentials"], {
      cwd: repo.dir,
      env: cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: KEY }),
    });
    expect(text.exitCode, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/codex {2}OPENAI_API_KEY {2}not set in this environment/);
    expect(text.stdout).toMatch(/claude {2}ANTHROPIC_API_KEY {2}open/);
  });
});
