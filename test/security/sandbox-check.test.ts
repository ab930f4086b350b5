// A worker that cannot contain its agents says so when it starts, and never falls back silently.
import { mkdir, symlink } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliEnv, fleet, tempGitRepo, tempHome } from "../cli/cli-helpers.ts";

describe("fleet run on a machine without bubblewrap", () => {
  let home: { dir: string; cleanup: () => Promise<void> };
  /** PATH with node and git, and no bwrap. */
  let bin: string;

  beforeAll(async () => {
    home = await tempHome();
    bin = join(home.dir, "bin");
    await mkdir(bin);
    for (const tool of ["node", "git", "sh"]) await symlink(`/usr/bin/${tool}`, join(bin, tool));
  });
  afterAll(async () => home?.cleanup());

  it("refuses to start, says what to install, and names `sandbox: none` as the explicit way out", async () => {
    const repo = await tempGitRepo({ ".github/fleet.yml": "plan_phase: false\n" });
    try {
      const r = await fleet(["run", "--until-idle"], {
        cwd: repo.dir,
        env: cliEnv({ FLEET_HOME: join(home.dir, "fleet"), PATH: bin }),
      });
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(/bubblewrap \(bwrap\) is not installed on this machine/);
      expect(r.stderr).toMatch(/apt-get install bubblewrap/);
      expect(r.stderr).toMatch(/`sandbox: none` in \.github\/fleet\.yml/);
      expect(r.stderr).not.toMatch(/worker for/);
    } finally {
      await repo.cleanup();
    }
  }, 60_000);

  it("starts with `sandbox: none` chosen in the file", async () => {
    const repo = await tempGitRepo({ ".github/fleet.yml": "plan_phase: false\nsandbox: none\n" });
    try {
      const r = await fleet(["run", "--until-idle"], {
        cwd: repo.dir,
        env: cliEnv({ FLEET_HOME: join(home.dir, "fleet-none"), PATH: bin }),
      });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/nothing to do/);
    } finally {
      await repo.cleanup();
    }
  }, 60_000);
});
