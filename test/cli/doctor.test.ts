import { generateKeyPairSync } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { GIT_INFO_REFS_ROUTE } from "@fleet/github-emulator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CheckResult } from "../../src/core/doctor.ts";
import { freePort } from "../support/free-port.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { cliEnv, fleet, mapLimit } from "./cli-helpers.ts";

// Only Claude is set up on this "machine": the other coders are off in the repository's config.
const FLEET_YML =
  "coders:\n  codex: { enabled: false }\n  agy: { enabled: false }\n  gemini: { enabled: false }\n  opencode: { enabled: false }\n";
const CREDENTIAL = "sk-ant-doctor-test-credential-0000";

interface Report {
  ok: boolean;
  checks: CheckResult[];
}

describe("fleet doctor against the offline GitHub and the real app", () => {
  let h: Harness;
  let home: string;
  /** PATH folders with one tool left out each (git, bwrap, claude). */
  const without: Record<string, string> = {};
  let env: Record<string, string>;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    home = await mkdtemp(join(tmpdir(), "fleet-doctor-"));
    const tools: Record<string, string> = {
      node: process.execPath,
      sh: "/bin/sh",
      git: "/usr/bin/git",
      bwrap: "/usr/bin/bwrap",
      claude: resolve("node_modules/.bin/claude"),
    };
    for (const left of ["git", "bwrap", "claude"]) {
      const bin = join(home, `bin-without-${left}`);
      await mkdir(bin);
      for (const [name, target] of Object.entries(tools))
        if (name !== left) await symlink(target, join(bin, name));
      without[left] = bin;
    }
    env = cliEnv({
      FLEET_HOME: join(home, "fleet"),
      APP_ID: String(h.gh.appId),
      PRIVATE_KEY: h.gh.privateKey,
      WEBHOOK_SECRET: h.gh.webhookSecret,
      // As `fleet serve` reaches a GitHub other than github.com: GitHub Enterprise's /api/v3.
      GHE_HOST: new URL(h.gh.url).host,
      GHE_PROTOCOL: "http",
      FLEET_PUBLIC_URL: h.app.url,
      GITHUB_TOKEN: h.gh.userToken("mona"),
      ANTHROPIC_API_KEY: CREDENTIAL,
    });
  });
  afterAll(async () => {
    await h?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  const doctor = async (args: string[], change: Record<string, string | undefined> = {}) => {
    const e: Record<string, string> = { ...env };
    for (const [k, v] of Object.entries(change)) {
      if (v === undefined) delete e[k];
      else e[k] = v;
    }
    return fleet(["doctor", "--repo", h.full, "--api-url", h.gh.url, ...args], { cwd: home, env: e });
  };
  const report = async (args: string[], change: Record<string, string | undefined> = {}) => {
    const r = await doctor([...args, "--json"], change);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    return { exitCode: r.exitCode, ...(JSON.parse(r.stdout) as Report) };
  };
  const check = (r: Report, id: string) => {
    const c = r.checks.find((x) => x.id === id);
    expect(c, `${id} in ${r.checks.map((x) => x.id).join(", ")}`).toBeDefined();
    return c!;
  };

  it("all pass: the app's credentials, token, secret, configs, public URL, state; git, bwrap, cgroups, claude", async () => {
    const r = await report([]);
    expect(r.exitCode, JSON.stringify(r.checks, null, 1)).toBe(0);
    expect(r.ok).toBe(true);
    const ids = r.checks.map((c) => c.id);
    expect(ids).toEqual([
      "app.id",
      "app.key",
      "app.credentials",
      "app.permissions",
      "app.installations",
      "app.token",
      "app.webhook-secret",
      "app.config",
      "app.public-url",
      `state.read:${h.full}`,
      "app.node-flags",
      "worker.target",
      "worker.config",
      `state.read:${h.full}`,
      "host.git",
      "host.sandbox",
      "host.forwarder",
      "host.cgroups",
      "coder.claude",
      "host.node-flags",
    ]);
    // Cgroup limits depend on the host (a writable cgroup): at worst a warning, never a failure.
    for (const c of r.checks)
      expect(c.status, `${c.id}: ${c.detail}`).toMatch(c.id === "host.cgroups" ? /^(ok|warn)$/ : /^ok$/);
    expect(check(r, "app.credentials").detail).toMatch(/^Fleet \(fleet, id \d+/);
    expect(check(r, "app.public-url").detail).toBe(`${h.app.url} answers as Fleet's token exchange`);
    expect(check(r, "host.node-flags").detail).toBe(
      "--optimize-for-size (Fleet's own; FLEET_RUN_NODE_FLAGS unset)",
    );
    expect(check(r, "coder.claude").detail).toMatch(
      /^claude \d+\.\d+\.\d+.*, credential ANTHROPIC_API_KEY set$/,
    );

    // The same checks as lines: one each, then the count.
    const text = await doctor([]);
    expect(text.exitCode).toBe(0);
    const lines = text.stdout.trim().split("\n");
    expect(lines.slice(0, r.checks.length).every((l) => /^(ok|warn|skip) {2}/.test(l))).toBe(true);
    expect(lines.at(-1)).toMatch(/^\d+ ok/);
    expect(text.stdout).not.toContain(CREDENTIAL);
    expect(text.stdout).not.toContain(h.gh.webhookSecret);
  }, 120_000);

  it("each fault in the settings or on the machine: its failing line and its fix", async () => {
    const otherKey = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    }).privateKey;
    const closed = `127.0.0.1:${await freePort()}`;
    // The app's side without its state reads (each case is one `fleet doctor` process on a busy machine).
    const app = ["--app", "--state-limit", "0"];
    const worker = ["--worker"];
    type Case = [string, string[], Record<string, string | undefined>, Array<[string, RegExp, RegExp]>];
    const cases: Case[] = [
      ["wrong APP_ID", app, { APP_ID: "999" }, [["app.credentials", /refused GET \/app: 401/, /same app's/]]],
      [
        "a flag node does not know, for the worker",
        worker,
        { FLEET_RUN_NODE_FLAGS: "--no-such-node-flag" },
        [
          [
            "host.node-flags",
            /node refuses the flags in FLEET_RUN_NODE_FLAGS: .*--no-such-node-flag/,
            /fix FLEET_RUN_NODE_FLAGS/,
          ],
        ],
      ],
      [
        "a flag that makes node print its version, for the app",
        app,
        { FLEET_SERVE_NODE_FLAGS: "--version" },
        [
          [
            "app.node-flags",
            /makes node do something else than run `fleet serve`/,
            /fix FLEET_SERVE_NODE_FLAGS/,
          ],
        ],
      ],
      ["another app's key", app, { PRIVATE_KEY: otherKey }, [["app.credentials", /401/, /same app's/]]],
      [
        "missing key file",
        app,
        { PRIVATE_KEY: undefined, PRIVATE_KEY_PATH: join(home, "nope.pem") },
        [["app.key", /nope\.pem/, /PRIVATE_KEY_PATH to the \.pem file/]],
      ],
      [
        "no key",
        app,
        { PRIVATE_KEY: undefined },
        [["app.key", /neither PRIVATE_KEY nor/, /generate a private key/]],
      ],
      [
        "GitHub unreachable",
        app,
        { GHE_HOST: closed },
        [["app.credentials", /refused GET \/app: .*ECONNREFUSED/, /reach GitHub's API/]],
      ],
      [
        "no webhook secret, no public URL",
        app,
        { WEBHOOK_SECRET: undefined, FLEET_PUBLIC_URL: undefined },
        [
          ["app.webhook-secret", /not set/, /WEBHOOK_SECRET/],
          [
            "app.public-url",
            /not set, and 1 installed repository uses dispatch: actions \(octo-org\/widgets\)/,
            /set FLEET_PUBLIC_URL/,
          ],
        ],
      ],
      [
        "public URL not answering",
        app,
        { FLEET_PUBLIC_URL: `http://${closed}` },
        [["app.public-url", /did not answer \(ECONNREFUSED\)/, /reach this app from the runners/]],
      ],
      [
        "public URL not Fleet",
        app,
        { FLEET_PUBLIC_URL: h.gh.url },
        [["app.public-url", /answered 404, not as Fleet's token exchange/, /lead to this app/]],
      ],
      ["no git", worker, { PATH: without.git! }, [["host.git", /git is not on PATH/, /install git/]]],
      [
        "no bubblewrap",
        worker,
        { PATH: without.bwrap! },
        [["host.sandbox", /bubblewrap \(bwrap\) is not installed/, /install bubblewrap/]],
      ],
      [
        "no claude credential, no GitHub token",
        worker,
        { ANTHROPIC_API_KEY: undefined, GITHUB_TOKEN: undefined },
        [
          [
            "coder.claude",
            /no ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN set/,
            /set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN/,
          ],
          ["worker.target", /No GitHub token/, /GITHUB_TOKEN/],
        ],
      ],
    ];
    const results = await mapLimit(cases, 2, ([, args, change]) => report(args, change));
    results.forEach((r, i) => {
      const [name, , , expected] = cases[i]!;
      expect(r.exitCode, name).toBe(1);
      expect(r.ok, name).toBe(false);
      for (const [id, detail, fix] of expected) {
        const c = check(r, id);
        expect({ name, id, status: c.status }).toEqual({ name, id, status: "fail" });
        expect(c.detail, name).toMatch(detail);
        expect(c.fix, name).toMatch(fix);
      }
    });
    // A coder's CLI off PATH is the one installed with Fleet, as a run finds it: usable, and said so.
    const offPath = await report(worker, { PATH: without.claude! });
    expect(check(offPath, "coder.claude")).toMatchObject({
      status: "ok",
      detail: expect.stringMatching(
        /^claude \d+\.\d+\.\d+.* \(installed with Fleet\), credential ANTHROPIC_API_KEY set$/,
      ),
    });
    // The line as printed, fix included.
    const text = await doctor(app, { FLEET_PUBLIC_URL: undefined });
    expect(text.stdout).toMatch(/^FAIL {2}FLEET_PUBLIC_URL: not set, .* -> fix: set FLEET_PUBLIC_URL to /m);
  }, 240_000);

  it("each fault on GitHub: a token GitHub will not mint, an invalid config, a corrupt or unreachable state branch", async () => {
    // The installation has not accepted a permission a run needs.
    h.gh.faults.inject({
      route: "POST /app/installations/{installation_id}/access_tokens",
      status: 422,
      times: 1,
    });
    let r = await report(["--app"]);
    expect(check(r, "app.token")).toMatchObject({
      status: "fail",
      detail: expect.stringMatching(
        /no token for installation \d+ with contents, issues, pull_requests, actions: write: 422/,
      ),
      fix: expect.stringMatching(/accept the new permissions on each installation/),
    });
    h.gh.faults.clear();

    const repo = { owner: h.owner, repo: h.name };
    const { data: cfg } = await h.mona.rest.repos.getContent({ ...repo, path: ".github/fleet.yml" });
    await h.mona.rest.repos.createOrUpdateFileContents({
      ...repo,
      path: ".github/fleet.yml",
      message: "a bad config",
      content: Buffer.from(`${FLEET_YML}max_concurrent: lots\n`).toString("base64"),
      sha: (cfg as { sha: string }).sha,
    });
    r = await report([]);
    expect(check(r, "app.config")).toMatchObject({
      status: "fail",
      detail: expect.stringMatching(/invalid in 1 repository: octo-org\/widgets \(max_concurrent: /),
      fix: expect.stringMatching(/fleet config show/),
    });
    expect(check(r, "worker.config")).toMatchObject({
      status: "fail",
      detail: expect.stringMatching(/max_concurrent/),
    });
    const { data: bad } = await h.mona.rest.repos.getContent({ ...repo, path: ".github/fleet.yml" });
    await h.mona.rest.repos.createOrUpdateFileContents({
      ...repo,
      path: ".github/fleet.yml",
      message: "the config again",
      content: Buffer.from(FLEET_YML).toString("base64"),
      sha: (bad as { sha: string }).sha,
    });

    // A state document that does not parse.
    const { data: main } = await h.mona.rest.git.getRef({ ...repo, ref: "heads/main" });
    await h.mona.rest.git.createRef({ ...repo, ref: "refs/heads/fleet/state", sha: main.object.sha });
    await h.mona.rest.repos.createOrUpdateFileContents({
      ...repo,
      path: ".fleet/state.json",
      branch: "fleet/state",
      message: "garbage",
      content: Buffer.from("{ not json").toString("base64"),
    });
    r = await report([]);
    for (const c of r.checks.filter((x) => x.id === `state.read:${h.full}`))
      expect(c).toMatchObject({
        status: "fail",
        fix: expect.stringMatching(/revert the last commit on fleet\/state/),
      });
    expect(r.checks.filter((x) => x.id === `state.read:${h.full}`)).toHaveLength(2);
    await h.mona.rest.git.deleteRef({ ...repo, ref: "heads/fleet/state" });

    // git over HTTP failing: the state branch cannot be fetched.
    h.gh.faults.inject({ route: GIT_INFO_REFS_ROUTE, status: 500 });
    r = await report(["--app"]);
    h.gh.faults.clear();
    expect(check(r, `state.read:${h.full}`)).toMatchObject({
      status: "fail",
      detail: expect.stringMatching(/fleet\/state could not be read/),
    });
    // Back to all well.
    r = await report(["--app"]);
    expect(r.checks.filter((c) => c.status !== "ok")).toEqual([]);
  }, 240_000);
});
