// `fleet serve` and `fleet run` run the doctor's checks for what would fail later, and stop at start
// with the same lines `fleet doctor` prints.
import { mkdir, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../support/bot-client.ts";
import { FLEET_APP } from "../support/fleet-app.ts";
import { freePort } from "../support/free-port.ts";
import { cliEnv, fleet } from "./cli-helpers.ts";

const root = resolve(".");

describe("fleet serve checks the app before it listens", () => {
  let gh: GitHubEmulator | undefined;
  let cwd: string | undefined;
  afterEach(async () => {
    await gh?.stop();
    gh = undefined;
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  async function setUp(files: Record<string, string>) {
    gh = await startGitHubEmulator(FLEET_APP);
    await gh.createRepo({ owner: "octo-org", name: "widgets", files: { "README.md": "# w\n", ...files } });
    gh.addCollaborator("octo-org/widgets", "mona", "write");
    cwd = await mkdtemp(join(tmpdir(), "fleet-serve-checks-"));
    const port = await freePort();
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? cwd,
      APP_ID: String(gh.appId),
      PRIVATE_KEY: gh.privateKey,
      WEBHOOK_SECRET: gh.webhookSecret,
      GHE_HOST: new URL(gh.url).host,
      GHE_PROTOCOL: "http",
      HOST: "localhost",
      PORT: String(port),
      LOG_LEVEL: "warn",
      NO_SMEE_SETUP: "true",
    };
    return { gh, cwd, port, env };
  }

  const serve = (cwd: string, env: Record<string, string>) =>
    execa(process.execPath, [join(root, "bin/fleet.js"), "serve"], {
      cwd,
      env,
      extendEnv: false,
      reject: false,
      timeout: 60_000,
      all: true,
    });

  it("a wrong APP_ID stops it with the doctor's line and fix, and no stack trace", async () => {
    const s = await setUp({ ".github/fleet.yml": "dispatch: local\n" });
    const r = await serve(s.cwd, { ...s.env, APP_ID: "4242" });
    expect(r.timedOut, "fleet serve started").toBe(false);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/^fleet serve: cannot start:$/m);
    expect(r.stderr).toMatch(
      /^FAIL {2}GitHub App: .* refused GET \/app: 401 .* -> fix: APP_ID and the private key/m,
    );
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 90_000);

  it("a missing key file is a clear error", async () => {
    const s = await setUp({});
    const env: Record<string, string> = { ...s.env, PRIVATE_KEY_PATH: join(s.cwd, "fleet.pem") };
    delete env.PRIVATE_KEY;
    const r = await serve(s.cwd, env);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`Private key does not exists at path: "${join(s.cwd, "fleet.pem")}"`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 90_000);

  it("dispatch: actions without FLEET_PUBLIC_URL stops it, naming the repository", async () => {
    const s = await setUp({});
    const r = await serve(s.cwd, s.env);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(
      /^FAIL {2}FLEET_PUBLIC_URL: not set, and 1 installed repository uses dispatch: actions \(octo-org\/widgets\): .* -> fix: set FLEET_PUBLIC_URL/m,
    );
  }, 90_000);

  it("with FLEET_PUBLIC_URL it starts, and dispatched runs are told that URL", async () => {
    const workflow = await readFile(join(root, ".github/workflows/fleet-task.yml"), "utf8");
    const s = await setUp({ ".github/workflows/fleet-task.yml": workflow });
    // Another spelling of this server than the one it listens as (localhost): the one runs must use.
    const publicUrl = `http://127.0.0.1:${s.port}`;
    const child = serve(s.cwd, { ...s.env, FLEET_PUBLIC_URL: publicUrl });
    try {
      await waitFor(
        "fleet serve listening",
        async () =>
          (await fetch(`${publicUrl}/ping`)
            .then((r) => r.status)
            .catch(() => 0)) === 200,
        45_000,
      );
      s.gh.setWebhookUrl(`${publicUrl}/api/github/webhooks`);
      const mona = new Octokit({ baseUrl: s.gh.url, auth: s.gh.userToken("mona") });
      const repo = { owner: "octo-org", repo: "widgets" };
      const { data: issue } = await mona.rest.issues.create({ ...repo, title: "Add a changelog" });
      await mona.rest.issues.addLabels({ ...repo, issue_number: issue.number, labels: ["fleet:claude"] });
      await waitFor("the task's run", async () => s.gh.workflowRuns("octo-org/widgets").length > 0, 30_000);
      expect(s.gh.workflowRuns("octo-org/widgets")[0]!.inputs.fleet_url).toBe(publicUrl);
    } finally {
      child.kill("SIGTERM");
      const r = await child;
      expect(r.all).not.toMatch(/cannot start/);
    }
  }, 120_000);
});

describe("fleet run checks the machine before it claims a task", () => {
  it("no git: stops with the doctor's line and fix", async () => {
    const dir = await mkdtemp(join(tmpdir(), "fleet-run-checks-"));
    try {
      const bin = join(dir, "bin");
      await mkdir(bin);
      // Everything a worker needs (the sandbox's probe runs sh and grep) but git.
      for (const tool of ["/bin/sh", "/usr/bin/bwrap", "/usr/bin/grep", "/usr/bin/test"])
        await symlink(tool, join(bin, tool.split("/").at(-1)!));
      await symlink(process.execPath, join(bin, "node"));
      const r = await fleet(["run", "--until-idle", "--local"], {
        cwd: dir,
        env: cliEnv({ FLEET_HOME: join(dir, "home"), PATH: bin }),
      });
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(
        /^fleet run: cannot start:\nFAIL {2}git: git is not on PATH -> fix: install git/m,
      );
      expect(r.stderr).not.toMatch(/worker for/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
