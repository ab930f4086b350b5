// The image's entry point, run as a script (no container engine here): a stand-in `fleet` records what
// it was asked to do, and the doctor's answer is whatever the test says.
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ENTRYPOINT = resolve("docker/entrypoint.sh");

describe("docker/entrypoint.sh", () => {
  let dir: string;
  let stub: string;
  let log: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-entrypoint-"));
    stub = join(dir, "fleet");
    log = join(dir, "calls");
    // Each call: its arguments and the HOST and NODE_ENV it saw; `doctor` exits with $DOCTOR_EXIT.
    await writeFile(
      stub,
      `#!/bin/sh\nprintf '%s|HOST=%s|NODE_ENV=%s\\n' "$*" "\${HOST:-}" "\${NODE_ENV:-}" >> "${log}"\n[ "$1" = doctor ] && exit "\${DOCTOR_EXIT:-0}"\nexit 0\n`,
    );
    await chmod(stub, 0o755);
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Runs the entry point with only `env` (and PATH), under the image's /bin/sh (dash). */
  async function entry(args: string[], env: Record<string, string> = {}) {
    await writeFile(log, "");
    const r = await execa("/bin/sh", [ENTRYPOINT, ...args], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", FLEET_BIN: stub, ...env },
      extendEnv: false,
      reject: false,
    });
    const calls = (await readFile(log, "utf8")).split("\n").filter(Boolean);
    return { code: r.exitCode, stderr: String(r.stderr), calls };
  }

  const APP = {
    APP_ID: "12345",
    PRIVATE_KEY: "-----BEGIN RSA PRIVATE KEY-----\nx=\n",
    WEBHOOK_SECRET: "s3cret",
  };

  it("is POSIX sh (the image's /bin/sh is dash)", async () => {
    expect((await execa("/bin/sh", ["-n", ENTRYPOINT], { reject: false })).exitCode).toBe(0);
  });

  it("serve (the default): names every missing setting and starts nothing", async () => {
    const r = await entry([]);
    expect(r.code).toBe(64);
    expect(r.stderr).toContain(
      "fleet-entrypoint: serve needs APP_ID PRIVATE_KEY_PATH or PRIVATE_KEY WEBHOOK_SECRET (see docs/deploy.md); nothing started.",
    );
    expect(r.calls).toEqual([]);
    const key = await entry(["serve"], {
      ...APP,
      PRIVATE_KEY: "",
      PRIVATE_KEY_PATH: join(dir, "missing.pem"),
    });
    expect(key.code).toBe(64);
    expect(key.stderr).toMatch(/PRIVATE_KEY_PATH=.*missing\.pem is not a readable file/);
    expect(key.calls).toEqual([]);
  });

  it("serve: listens on every interface in production mode, warns without FLEET_PUBLIC_URL", async () => {
    const r = await entry(["serve"], APP);
    expect(r.code).toBe(0);
    expect(r.calls).toEqual(["serve|HOST=0.0.0.0|NODE_ENV=production"]);
    expect(r.stderr).toMatch(/FLEET_PUBLIC_URL is not set/);
    const set = await entry([], { ...APP, FLEET_PUBLIC_URL: "https://fleet.example.com", HOST: "127.0.0.1" });
    expect(set.calls).toEqual(["serve|HOST=127.0.0.1|NODE_ENV=production"]);
    expect(set.stderr).toBe("");
  });

  it("run: needs a token and FLEET_REPO, runs the doctor first, and starts no worker when it fails", async () => {
    const missing = await entry(["run"]);
    expect(missing.code).toBe(64);
    expect(missing.stderr).toContain("run needs GITHUB_TOKEN or GH_TOKEN FLEET_REPO");
    expect(missing.calls).toEqual([]);

    const worker = { GITHUB_TOKEN: "ghp_x", FLEET_REPO: "octo-org/widgets" };
    const ok = await entry(["run", "--concurrency", "2"], worker);
    expect(ok.code).toBe(0);
    expect(ok.calls.map((c) => c.split("|")[0])).toEqual([
      "doctor --worker --repo octo-org/widgets",
      "run --repo octo-org/widgets --concurrency 2",
    ]);

    const failing = await entry(["run"], { ...worker, DOCTOR_EXIT: "1" });
    expect(failing.code).toBe(1);
    expect(failing.calls.map((c) => c.split("|")[0])).toEqual(["doctor --worker --repo octo-org/widgets"]);
    expect(failing.stderr).toMatch(/fix the FAIL lines above; the worker did not start/);
  });

  it("doctor and any other command go to fleet as they are", async () => {
    expect((await entry(["doctor", "--app"])).calls.map((c) => c.split("|")[0])).toEqual(["doctor --app"]);
    expect((await entry(["tasks", "--repo", "o/r", "--json"])).calls.map((c) => c.split("|")[0])).toEqual([
      "tasks --repo o/r --json",
    ]);
  });
});
