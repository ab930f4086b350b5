// `fleet run` (the worker, a long-running process) runs from the build (build/fleet.mjs on plain node),
// as `fleet serve` does, not through tsx's loader, and one-shot commands run it when it is current: a
// preload records every module file node loads.
import { cp, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUILT_APP } from "../../scripts/build-app.mjs";
import { RUN_NODE_FLAGS } from "../../scripts/node-flags.mjs";
import { cliEnv, FLEET_BIN, tempGitRepo, tempHome } from "./cli-helpers.ts";

// Loaded with --import before bin/fleet.js: Fleet's own module files (not packages) and tsx's, one URL a
// line; and each node's flags as it starts (bin/fleet.js starts node again for the long-running commands).
const RECORDER = `import { appendFileSync } from "node:fs";
import { registerHooks } from "node:module";
appendFileSync(process.env.LOADED_TO, "execArgv " + JSON.stringify(process.execArgv) + "\\n");
registerHooks({
  load(url, context, next) {
    if (url.startsWith("file:") && (!url.includes("/node_modules/") || url.includes("/node_modules/tsx/")))
      appendFileSync(process.env.LOADED_TO, url + "\\n");
    return next(url, context);
  },
});
`;
const isTsx = (url: string) => url.includes("/node_modules/tsx/");

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
    const lines = (await readFile(loadedTo, "utf8").catch(() => "")).split("\n").filter(Boolean);
    const loaded = lines.filter((l) => !l.startsWith("execArgv "));
    /** Each node's flags, in the order they started (besides the recorder's own --import). */
    const starts = lines
      .filter((l) => l.startsWith("execArgv "))
      .map((l) =>
        (JSON.parse(l.slice("execArgv ".length)) as string[]).filter(
          (a) => !a.startsWith("--import") && !a.startsWith("file:"),
        ),
      );
    return { r, loaded, starts };
  }

  it("a worker on an idle local queue loads build/fleet.mjs and no TypeScript source, and finds the coders' CLIs installed with Fleet", async () => {
    // No node_modules/.bin on PATH: the coders' CLIs are found from the install root, which the
    // bundle finds from its own file (build/ inside the install).
    const path = (process.env.PATH ?? "")
      .split(":")
      .filter((dir) => !dir.includes("node_modules/.bin"))
      .join(":");
    const { r, loaded, starts } = await fleetRecorded(
      ["run", "--until-idle"],
      cliEnv({ FLEET_HOME: home.dir, PATH: path }),
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/nothing to do: no task is queued or running/);
    // Started again, once, with the worker's node flags (scripts/node-flags.mjs).
    expect(starts).toEqual([[], [...RUN_NODE_FLAGS]]);
    expect(loaded).toContain(pathToFileURL(BUILT_APP).href);
    expect(loaded.filter((url) => url.startsWith(SRC))).toEqual([]);
    expect(r.stderr).toMatch(/coder claude: claude \(installed with Fleet\)/);
  }, 150_000);

  it("FLEET_RUN_NODE_FLAGS gives the worker's node flags in place of its own, none when empty; a mode flag is refused before anything starts", async () => {
    const given = await fleetRecorded(
      ["run", "--until-idle"],
      cliEnv({ FLEET_HOME: home.dir, FLEET_RUN_NODE_FLAGS: "--max-semi-space-size=8" }),
    );
    expect(given.r.exitCode, given.r.stderr).toBe(0);
    expect(given.starts).toEqual([[], ["--max-semi-space-size=8"]]);
    const none = await fleetRecorded(
      ["run", "--until-idle"],
      cliEnv({ FLEET_HOME: home.dir, FLEET_RUN_NODE_FLAGS: "" }),
    );
    expect(none.r.exitCode, none.r.stderr).toBe(0);
    expect(none.starts).toEqual([[]]);
    /** `fleet run` with these flags: refused before node starts again, with exit 64 and `said`. */
    const refused = async (value: string, said: RegExp) => {
      const { r, starts } = await fleetRecorded(
        ["run"],
        cliEnv({ FLEET_HOME: home.dir, FLEET_RUN_NODE_FLAGS: value }),
      );
      expect(r.exitCode).toBe(64);
      expect(r.stderr).toMatch(said);
      expect(starts).toEqual([[]]);
    };
    await refused(
      "--version",
      /^fleet run: FLEET_RUN_NODE_FLAGS has `--version`, which makes node do something else/,
    );
    // A flag node does not know: refused naming the variable, not node's bare "bad option".
    await refused(
      "--no-such-flag",
      /^fleet run: node refuses the flags in FLEET_RUN_NODE_FLAGS \(\S*node: bad option: --no-such-flag\): fix or unset it\.$/m,
    );
  }, 150_000);

  it("`fleet run --help` does not build: it prints the usage from the sources, on node's own type stripping (no tsx)", async () => {
    const { r, loaded } = await fleetRecorded(["run", "--help"], cliEnv({ FLEET_HOME: home.dir }));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Usage: fleet run /);
    expect(r.stderr).toBe("");
    expect(loaded).not.toContain(pathToFileURL(BUILT_APP).href);
    expect(loaded).toContain(`${SRC}/cli/commands/run.ts`);
    // Node 24 (what Fleet is tested on) strips the types itself.
    expect(loaded.filter(isTsx)).toEqual([]);
  }, 150_000);

  it("a start builds only when a file the build was made from changed: an unchanged install runs the build it has, and a one-shot command runs it when current, else the sources", async () => {
    // An install of its own, sources copied so that one can change.
    const install = await mkdtemp(join(tmpdir(), "fleet-install-"));
    try {
      for (const dir of ["bin", "scripts", "src"])
        await cp(resolve(dir), join(install, dir), { recursive: true });
      for (const link of ["node_modules", "package.json"]) await symlink(resolve(link), join(install, link));
      const built = join(install, "build/fleet.mjs");
      const start = async () => {
        const { r } = await fleetRecorded(
          ["run", "--until-idle"],
          cliEnv({ FLEET_HOME: home.dir }),
          join(install, "bin/fleet.js"),
        );
        expect(r.exitCode, r.stderr).toBe(0);
        expect(r.stderr).toMatch(/nothing to do: no task is queued or running/);
        return (await stat(built)).mtimeMs;
      };
      /** `fleet tasks` in the install: the module files it loaded. */
      const oneShot = async () => {
        const { r, loaded } = await fleetRecorded(
          ["tasks", "--local"],
          cliEnv({ FLEET_HOME: home.dir }),
          join(install, "bin/fleet.js"),
        );
        expect(r.exitCode, r.stderr).toBe(0);
        return loaded;
      };
      const sources = pathToFileURL(join(install, "src")).href;
      const first = await start();
      expect(await start()).toBe(first);
      // A one-shot command runs the current build, and no source.
      let loaded = await oneShot();
      expect(loaded).toContain(pathToFileURL(built).href);
      expect(loaded.filter((url) => url.startsWith(sources))).toEqual([]);
      // A source changes (as a checkout or an upgrade changes it): a one-shot command runs the sources
      // as they are, without building; the next start of the worker builds it in.
      const main = join(install, "src/cli/main.ts");
      await writeFile(
        main,
        `${await readFile(main, "utf8")}\nexport const PROBE = "changed after the build";\n`,
      );
      loaded = await oneShot();
      expect(loaded).not.toContain(pathToFileURL(built).href);
      expect(loaded).toContain(`${sources}/cli/main.ts`);
      expect((await stat(built)).mtimeMs).toBe(first);
      expect(await start()).not.toBe(first);
      expect(await readFile(built, "utf8")).toContain("changed after the build");
      // The build's chunks removed (a clean of build/): a command runs the sources and says so.
      await rm(join(install, "build/chunks"), { recursive: true, force: true });
      const { r, loaded: afterClean } = await fleetRecorded(
        ["tasks", "--local"],
        cliEnv({ FLEET_HOME: home.dir }),
        join(install, "bin/fleet.js"),
      );
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/^fleet: the build could not be loaded \(.*\); running the sources$/m);
      expect(afterClean).toContain(`${sources}/cli/main.ts`);
    } finally {
      await rm(install, { recursive: true, force: true });
    }
  }, 150_000);

  it("when the build cannot be written, the worker says so and runs the sources instead", async () => {
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
      expect(r.stderr).toMatch(/^fleet run: running the sources instead of the build$/m);
      expect(r.stderr).toMatch(/nothing to do: no task is queued or running/);
      expect(loaded).toContain(`${SRC}/cli/commands/run.ts`);
    } finally {
      await rm(install, { recursive: true, force: true });
    }
  }, 150_000);
});
