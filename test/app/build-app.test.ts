import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUILT_APP, buildApp, builtIsCurrent } from "../../scripts/build-app.mjs";
import { SERVE_NODE_FLAGS } from "../../scripts/node-flags.mjs";
import { freePort } from "../support/free-port.ts";

const root = resolve(import.meta.dirname, "../..");

describe("the built app (npm start: scripts/build-app.mjs, then plain node)", () => {
  let dir: string;
  let out: string;
  let cwd: string;

  beforeAll(async () => {
    // Inside the repository: the packages stay external and resolve from its node_modules.
    await mkdir(join(root, "build"), { recursive: true });
    dir = await mkdtemp(join(root, "build", "test-"));
    out = join(dir, "fleet.mjs");
    expect(await buildApp({ outfile: out })).toEqual([]);
    // Probot's runner reads .env and package.json from the working directory: an empty one here.
    cwd = await mkdtemp(join(tmpdir(), "fleet-serve-"));
  }, 30_000);

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(cwd, { recursive: true, force: true });
  });

  it("a build is current only as the output its record names: another start's output over it is not", async () => {
    expect(await builtIsCurrent(out)).toBe(true);
    const copy = join(dir, "copy.mjs");
    expect(await buildApp({ outfile: copy })).toEqual([]);
    // As when two starts build at once and the other one's module lands last.
    await writeFile(copy, `${await readFile(copy, "utf8")}\n// another build\n`);
    expect(await builtIsCurrent(copy)).toBe(false);
    expect(await builtIsCurrent(join(dir, "never-built.mjs"))).toBe(false);
  });

  it("`--help` names the serve command", async () => {
    const result = await execa(process.execPath, [out, "--help"], { reject: false });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toMatch(/^\s+serve\s/m);
  });

  /** Runs `args` (a serve command) without credentials; the status of / and of /probot, and its output. */
  async function serveWithoutCredentials(args: string[], extraEnv: Record<string, string> = {}) {
    const port = await freePort();
    const env: Record<string, string | undefined> = {
      ...process.env,
      PORT: String(port),
      NO_SMEE_SETUP: "true",
      ...extraEnv,
    };
    for (const key of ["APP_ID", "PRIVATE_KEY", "PRIVATE_KEY_PATH", "WEBHOOK_SECRET", "WEBHOOK_PROXY_URL"])
      delete env[key];
    // The app's node flags as the test gives them, not as the shell running the tests has them.
    if (!("FLEET_SERVE_NODE_FLAGS" in extraEnv)) delete env.FLEET_SERVE_NODE_FLAGS;
    // No `NODE_ENV=production`: Probot serves the setup page only outside production.
    delete env.NODE_ENV;
    const child = execa(process.execPath, args, { cwd, env, extendEnv: false, reject: false, all: true });
    let status: number | undefined;
    const deadline = Date.now() + 15_000;
    while (status === undefined && Date.now() < deadline && child.exitCode === null) {
      status = await fetch(`http://127.0.0.1:${port}/`, { redirect: "manual" }).then(
        (r) => r.status,
        () => undefined,
      );
      if (status === undefined) await new Promise((done) => setTimeout(done, 100));
    }
    const page = status === undefined ? undefined : await fetch(`http://127.0.0.1:${port}/probot`);
    // The node answering, as the system sees the process started (the pid execa started): its flags.
    const cmdline = (await readFile(`/proc/${child.pid}/cmdline`, "utf8").catch(() => ""))
      .split("\0")
      .filter(Boolean);
    child.kill();
    const { all } = await child;
    return { status, pageStatus: page?.status, all, cmdline };
  }

  it("`serve` without credentials starts Probot's setup page and answers HTTP on PORT", async () => {
    const { status, pageStatus, all } = await serveWithoutCredentials([out, "serve"]);
    // The setup app redirects / to its page, /probot.
    expect(status, all).toBe(302);
    expect(pageStatus, all).toBe(200);
  }, 20_000);

  it("the installed command's `fleet serve` runs a build of the sources as they are (built first when they changed)", async () => {
    const { status, all, cmdline } = await serveWithoutCredentials([join(root, "bin/fleet.js"), "serve"]);
    expect(status, all).toBe(302);
    // The process started is the app's (node started again in it, with the app's flags).
    expect(cmdline.slice(1)).toEqual([...SERVE_NODE_FLAGS, join(root, "bin/fleet.js"), "serve"]);
    // Never a stale build (test/cli/run-built.test.ts changes a source between starts).
    expect(await builtIsCurrent()).toBe(true);
    await stat(BUILT_APP);
  }, 20_000);

  it("`fleet serve` runs on the node flags FLEET_SERVE_NODE_FLAGS names, or on none when it is empty", async () => {
    const bin = join(root, "bin/fleet.js");
    const given = await serveWithoutCredentials([bin, "serve"], {
      FLEET_SERVE_NODE_FLAGS: " --max-semi-space-size=8  --stack-size=900 ",
    });
    expect(given.status, given.all).toBe(302);
    expect(given.cmdline.slice(1)).toEqual(["--max-semi-space-size=8", "--stack-size=900", bin, "serve"]);
    const none = await serveWithoutCredentials([bin, "serve"], { FLEET_SERVE_NODE_FLAGS: "" });
    expect(none.status, none.all).toBe(302);
    expect(none.cmdline.slice(1)).toEqual([bin, "serve"]);
    // A word that is not a flag would be node's script: refused before anything starts, and said why.
    const bad = await execa(process.execPath, [bin, "serve"], {
      cwd,
      env: { ...process.env, FLEET_SERVE_NODE_FLAGS: "/tmp/app.js" },
      reject: false,
    });
    expect(bad.exitCode).toBe(64);
    expect(bad.stderr).toMatch(
      /^fleet serve: FLEET_SERVE_NODE_FLAGS has `\/tmp\/app.js`, which is not a node flag/,
    );
  }, 30_000);
});
