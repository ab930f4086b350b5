// A `fleet run` worker killed hard (SIGKILL) leaves its task's lease behind. A worker started after it
// on the same machine sees the lease's process is gone and runs the task again at once, counting the
// attempt once, instead of leaving it `running` until the lease expires.

import { startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { processesWith } from "../security/containment-support.ts";
import { cliEnv, fleet, fleetProcess, scriptedRunArgs, tempGitRepo, tempHome } from "./cli-helpers.ts";

const FLEET_YML = "plan_phase: false\nretries: { max: 2 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 100, output_tokens: 10 };
const bash = (command: string) => ({ name: "Bash", input: { command, description: "step" } });

describe("a worker killed with SIGKILL (local mode)", () => {
  let repo: Awaited<ReturnType<typeof tempGitRepo>>;
  let home: Awaited<ReturnType<typeof tempHome>>;
  beforeAll(async () => {
    repo = await tempGitRepo({ ".github/fleet.yml": FLEET_YML });
    home = await tempHome();
  });
  afterAll(async () => {
    await repo?.cleanup();
    await home?.cleanup();
  });

  it("its task is run again at once by the next worker on this machine, the attempt counted once", async () => {
    const env = cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: "sk-ant-local-crash-credential-0000" });
    const store = createLocalStateStore({ home: home.dir });
    const task = async (id: string): Promise<Task> => (await store.read()).doc.tasks[id]!;
    const created = await fleet(
      ["bd", "create", "--title", "Crash", "--description", "Write DONE.md.", "--json"],
      {
        cwd: repo.dir,
        env,
      },
    );
    expect(created.exitCode, created.stderr).toBe(0);
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const marker = `sleep 301 # ${id}`;
    const model = await startAnthropicScriptServer({
      turns: [
        { toolUses: [bash(marker)], usage: USAGE },
        // The second run's agent.
        { toolUses: [bash("echo done > DONE.md")], usage: USAGE },
        { text: "Wrote DONE.md.", usage: USAGE },
      ],
    });
    const first = fleetProcess(
      scriptedRunArgs(model.url).filter((a) => a !== "--until-idle"),
      {
        cwd: repo.dir,
        env,
      },
    );
    try {
      for (let i = 0; i < 900 && (await processesWith(marker)).length === 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(await processesWith(marker), "the first run's agent never started").not.toEqual([]);
      const held = await task(id);
      expect(held).toMatchObject({ state: "running", attempts: 1 });
      expect(held.lease?.process?.pid).toBe(first.pid);

      first.kill("SIGKILL");
      await first;
      // Its agent died with it (its sandbox dies with its parent).
      for (let i = 0; i < 100 && (await processesWith(marker)).length > 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(await processesWith(marker)).toEqual([]);
      // The lease is still live: only the process that held it is gone.
      const orphan = await task(id);
      expect(orphan.state).toBe("running");
      expect(Date.parse(orphan.lease!.expiresAt)).toBeGreaterThan(Date.now() + 60_000);

      // Well before the lease expires (15 minutes), the next worker runs the task to its PR.
      const second = await fleetProcess(scriptedRunArgs(model.url), { cwd: repo.dir, env, timeout: 150_000 });
      expect(second.timedOut, "the next worker left the task alone").toBe(false);
      expect(second.exitCode, String(second.stderr)).toBe(0);
      expect(String(second.stderr)).toContain(`${id}: its worker local:`);
      expect(String(second.stderr)).toContain("is gone; the run goes back to the queue");
      const after = await task(id);
      expect(after).toMatchObject({ state: "pr-open", attempts: 2 });
      expect(model.played).toBe(3);
    } finally {
      first.kill("SIGKILL");
      await model.stop();
    }
  }, 300_000);
});
