// `fleet serve` with an unknown FLEET_STATE_TRANSPORT does not start: it says which values are valid,
// as the app started any other way does.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { startFleetServer } from "../../src/app/server.ts";
import { FLEET_APP } from "../support/fleet-app.ts";
import { freePort } from "../support/free-port.ts";

const root = resolve(import.meta.dirname, "../..");

describe("FLEET_STATE_TRANSPORT is checked when the app starts", () => {
  let gh: GitHubEmulator | undefined;
  let cwd: string | undefined;
  afterAll(async () => {
    await gh?.stop();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("fleet serve refuses an unknown transport, naming the valid ones, and does not listen", async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    cwd = await mkdtemp(join(tmpdir(), "fleet-serve-transport-"));
    const port = await freePort();
    const r = await execa(process.execPath, [join(root, "bin/fleet.js"), "serve"], {
      cwd,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        APP_ID: String(gh.appId),
        PRIVATE_KEY: gh.privateKey,
        WEBHOOK_SECRET: gh.webhookSecret,
        GHE_HOST: new URL(gh.url).host,
        GHE_PROTOCOL: "http",
        PORT: String(port),
        LOG_LEVEL: "warn",
        NO_SMEE_SETUP: "true",
        FLEET_STATE_TRANSPORT: "rest",
      },
      extendEnv: false,
      reject: false,
      timeout: 30_000,
    });
    expect(r.timedOut, "fleet serve started").toBe(false);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(
      'fleet serve: FLEET_STATE_TRANSPORT="rest" is not a state transport; use one of: git, api.',
    );
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);

  it("the app started in a process refuses it too", async () => {
    const before = process.env.FLEET_STATE_TRANSPORT;
    process.env.FLEET_STATE_TRANSPORT = "rest";
    try {
      await expect(
        startFleetServer({ appId: 1, privateKey: "unused", webhookSecret: "unused", logLevel: "fatal" }),
      ).rejects.toThrow('FLEET_STATE_TRANSPORT="rest" is not a state transport; use one of: git, api.');
    } finally {
      if (before === undefined) delete process.env.FLEET_STATE_TRANSPORT;
      else process.env.FLEET_STATE_TRANSPORT = before;
    }
  });
});
