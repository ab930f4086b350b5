// `fleet run` (the worker, a long-running process) runs from the build (build/fleet.mjs on plain node),
// as `fleet serve` does, not through tsx's loader: a preload records every module file node loads.
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUILT_APP } from "../../scripts/build-app.mjs";
import { cliEnv, FLEET_BIN, tempGitRepo, tempHome } from "./cli-helpers.ts";

// Loaded with --import before bin/fleet.js: Fleet's own module files (not packages), one URL a line.
const RECORDER = `import { appendFileSync } from "node:fs";
import { registerHooks } from "node:module";
registerHooks({
  load(url, context, next) {
    if (url.startsWith("file:") && !url.includes("/node_modules/")) appendFileSync(process.env.LOADED_TO, url + "\\n");
    return next(url, context);
  },
});
`;

const SRC = pathToFileURL(resolve("src")).href;

describe("fleet run runs from the build", () => {
  let home: Awaited<ReturnType<typeof tempHome>>;
  let repo: Awaited<ReturnType<typeof tempGitRepo>>;
  let recorder: string;

  beforeAll(async () => {
    home = await tempHome();
    repo = await tempGitRepo();
    recorder = join(home.dir, "record-loads.mjs");
    await writeFile(recorder, RECORDER);
  });
  afterAll(async () => {
    await home.cleanup();
    await repo.cleanup();
  });

  /** `node bin/fleet.js ...args` with the recorder; its result and the module files it loaded. */
  async function fleetRecorded(args: string[], env: Record<string, string>, bin = FLEET_BIN) {
    const loadedTo = join(home.dir, "loaded.txt");
    await rm(loadedTo, { force: true });
    const r = await execa(process.execPath, ["--import", pathToFileURL(recorder).href, bin, ...args], {
      cwd: repo.dir,
      env: { ...env, LOADED_TO: loadedTo },
      extendEnv: false,
      reject: false,
      timeout: 120_000,
    });
    const loaded = (await readFile(loadedTo, "utf8").catch(() => "")).split("\n").filter(Boolean);
    return { r, loaded };
  }

  it("a worker on an idle local queue loads build/fleet.mjs and no TypeScript source, and finds the coders' CLIs installed with Fleet", async () => {
    // No node_modules/.bin on PATH: the coders' CLIs are found from the install root, which the
    // bundle finds from its own file (build/ inside the install).
    const path = (process.env.PATH ?? "")
      .split(":")
      .filter((dir) => !dir.includes("node_modules/.bin"))
      .join(":");
    const { r, loaded } = await fleetRecorded(
      ["run", "--until-idle"],
      cliEnv({ FLEET_HOME: home.dir, PATH: path }),
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/nothing to do: no task is queued or running/);
    expect(loaded).toContain(pathToFileURL(BUILT_APP).href);
    expect(loaded.filter((url) => url.startsWith(SRC))).toEqual([]);
    expect(r.stderr).toMatch(/coder claude: claude \(installed with Fleet\)/);
  }, 150_000);

  it("`fleet run --help` does not build: it prints the usage from the sources", async () => {
    const { r, loaded } = await fleetRecorded(["run", "--help"], cliEnv({ FLEET_HOME: home.dir }));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Usage: fleet run /);
    expect(loaded).not.toContain(pathToFileURL(BUILT_APP).href);
    expect(loaded).toContain(`${SRC}/cli/commands/run.ts`);
  }, 150_000);

  it("when the build cannot be written, the worker says so and runs the sources through tsx", async () => {
    // An install whose build/ is a file: bin/ and scripts/ copied (they find the install from their own
    // files), the sources and packages linked.
    const install = await mkdtemp(join(tmpdir(), "fleet-install-"));
    try {
      for (const dir of ["bin", "scripts"]) await cp(resolve(dir), join(install, dir), { recursive: true });
      for (const link of ["src", "node_modules", "package.json"])
        await symlink(resolve(link), join(install, link));
      await writeFile(join(install, "build"), "not a folder\n");
      const { r, loaded } = await fleetRecorded(
        ["run", "--until-idle"],
        cliEnv({ FLEET_HOME: home.dir }),
        join(install, "bin/fleet.js"),
      );
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/^could not build the app into .*\/build\/fleet\.mjs: /m);
      expect(r.stderr).toMatch(/^fleet run: running the sources through tsx$/m);
      expect(r.stderr).toMatch(/nothing to do: no task is queued or running/);
      expect(loaded).toContain(`${SRC}/cli/commands/run.ts`);
    } finally {
      await rm(install, { recursive: true, force: true });
    }
  }, 150_000);
});
