// A first run as a new user makes it: the coder's CLI is only the one installed with Fleet (not on
// PATH) and no credential is set. `fleet run` finds the CLI, says which credential it looked for and
// how to set it, and spends none of the task's attempts on it.

import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { fleetBinDir, resolveExecutable } from "../../src/worker/sandbox/bubblewrap.ts";
import { cliEnv, fleet, scriptedRunArgs, tempGitRepo, tempHome } from "./cli-helpers.ts";

const FLEET_YML = "plan_phase: false\nretries: { max: 2 }\n";

describe("fleet run on a first install (local mode)", () => {
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

  it("finds the CLI in Fleet's install, names the missing credential, and spends no attempt", async () => {
    // node and the system's tools, and nothing of Fleet's own node_modules/.bin.
    const path = `${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`;
    expect(await resolveExecutable("claude", path), "claude is on the system PATH here").toBeUndefined();
    expect(await resolveExecutable("claude", fleetBinDir())).toBeDefined();
    const env = { ...cliEnv({ FLEET_HOME: home.dir }), PATH: path };
    const store = createLocalStateStore({ home: home.dir });
    const task = async (id: string): Promise<Task> => (await store.read()).doc.tasks[id]!;

    const created = await fleet(
      ["bd", "create", "--title", "First", "--description", "Write A.md.", "--json"],
      {
        cwd: repo.dir,
        env,
      },
    );
    expect(created.exitCode, created.stderr).toBe(0);
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    expect(await task(id)).toMatchObject({ state: "dispatched", attempts: 1 });

    // No model server is needed: the agent must never start.
    const run = await fleet(scriptedRunArgs("http://127.0.0.1:9"), { cwd: repo.dir, env });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toContain("ANTHROPIC_API_KEY");
    expect(run.stderr).toContain("CLAUDE_CODE_OAUTH_TOKEN");
    expect(run.stderr).not.toContain("was not found");

    const after = await task(id);
    expect(after.state).toBe("failed");
    expect(after.attempts).toBe(0);
    expect(after.reason).toMatch(
      /no credential for Claude Code: looked for `ANTHROPIC_API_KEY` or `CLAUDE_CODE_OAUTH_TOKEN`/,
    );
    expect(after.reason).toContain("export ANTHROPIC_API_KEY=");
    expect(after.runs ?? []).toEqual([]);

    // `fleet tasks` (no --all) still lists the task for a while, with its reason.
    const listed = await fleet(["tasks"], { cwd: repo.dir, env });
    expect(listed.stdout).toContain(`${id} failed: no credential for Claude Code`);

    // Shown where a person looks next.
    const shown = await fleet(["task", id], { cwd: repo.dir, env });
    expect(shown.stdout).toContain("ANTHROPIC_API_KEY");
  });
});
