import { describe, expect, it } from "vitest";
import {
  appAuthFix,
  appPermissionsCheck,
  cgroupCheck,
  coderCheck,
  codersSummary,
  doctorLine,
  doctorReport,
  failures,
  forwarderCheck,
  nodeFlagsCheck,
  passed,
  publicUrlCheck,
  sandboxCheck,
  stateCheck,
  webhookSecretCheck,
} from "../../src/core/doctor.ts";

const TOKEN_PATH = "/fleet/actions-token";
const CLAUDE = {
  coder: "claude",
  binary: "claude",
  credentialNames: ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
  npmPackage: "@anthropic-ai/claude-code",
};

describe("fleet doctor's verdicts", () => {
  it("one line per check: mark, title, what was found, and the fix of a failure", () => {
    expect(doctorLine(passed("host.git", "git", "git version 2.45.0"))).toBe("ok    git: git version 2.45.0");
    const secret = webhookSecretCheck(undefined);
    expect(doctorLine(secret)).toMatch(
      /^FAIL {2}webhook secret: WEBHOOK_SECRET is not set.* -> fix: set WEBHOOK_SECRET/,
    );
    expect(doctorLine(secret)).not.toContain("\n");
    const report = doctorReport([passed("a", "A", "fine"), secret, cgroupCheck({ kind: "none", why: "no" })]);
    expect(report.trim().split("\n")).toHaveLength(5);
    expect(report).toMatch(/1 ok, 1 warning, 1 failed\n$/);
    expect(failures([passed("a", "A", "x"), secret]).map((c) => c.id)).toEqual(["app.webhook-secret"]);
  });

  it("every failure and warning carries a fix", () => {
    const all = [
      webhookSecretCheck(undefined),
      publicUrlCheck({ url: undefined, actionsRepos: ["o/r"], tokenPath: TOKEN_PATH }),
      publicUrlCheck({ url: "ftp://x", actionsRepos: [], tokenPath: TOKEN_PATH }),
      publicUrlCheck({
        url: "https://f.example",
        actionsRepos: [],
        tokenPath: TOKEN_PATH,
        probe: { error: "ENOTFOUND" },
      }),
      sandboxCheck("bubblewrap", { error: "bwrap is missing" }),
      sandboxCheck("none", undefined),
      cgroupCheck({ kind: "none", why: "read-only" }),
      forwarderCheck("node"),
      coderCheck(CLAUDE),
      coderCheck({ ...CLAUDE, path: "/usr/bin/claude", version: "2.1" }),
      coderCheck({ ...CLAUDE, credentialFound: "ANTHROPIC_API_KEY" }),
      stateCheck("o/r", "fleet/state", { error: "bad", corrupt: true }),
      appPermissionsCheck({ contents: "write" }),
    ];
    for (const c of all) {
      expect(c.status, c.title).not.toBe("ok");
      expect(c.fix, c.title).toBeTruthy();
    }
  });

  it("the sandbox's forwarder: perl's passes, node's (no usable perl) warns with its cost and the fix", () => {
    expect(doctorLine(forwarderCheck("perl"))).toBe(
      "ok    sandbox network forwarder: perl's (/usr/bin/perl)",
    );
    expect(forwarderCheck("node")).toMatchObject({
      status: "warn",
      detail: expect.stringContaining("~0.1 s more CPU"),
      fix: expect.stringContaining("perl-base"),
    });
  });

  it("the node flags of `fleet serve` and `fleet run`: Fleet's own or the variable's; refused ones fail; a node that cannot restart warns", () => {
    const run = {
      command: "run" as const,
      variable: "FLEET_RUN_NODE_FLAGS",
      node: "v24.1.0",
      restarts: true,
      platform: "linux",
    };
    expect(doctorLine(nodeFlagsCheck({ ...run, given: false, flags: ["--optimize-for-size"] }))).toBe(
      "ok    node flags of `fleet run`: --optimize-for-size (Fleet's own; FLEET_RUN_NODE_FLAGS unset)",
    );
    expect(nodeFlagsCheck({ ...run, given: true, flags: [] }).detail).toBe(
      "none (node's defaults) (from FLEET_RUN_NODE_FLAGS)",
    );
    const bad = nodeFlagsCheck({
      ...run,
      given: true,
      flags: ["--nope"],
      refused: "node: bad option: --nope",
    });
    expect(bad).toMatchObject({ id: "host.node-flags", status: "fail" });
    expect(bad.detail).toBe("node refuses the flags in FLEET_RUN_NODE_FLAGS: node: bad option: --nope");
    expect(bad.fix).toMatch(/^fix FLEET_RUN_NODE_FLAGS/);
    expect(nodeFlagsCheck({ ...run, given: true, error: "FLEET_RUN_NODE_FLAGS has `x`" })).toMatchObject({
      status: "fail",
      detail: "FLEET_RUN_NODE_FLAGS has `x`",
    });
    const old = nodeFlagsCheck({
      command: "serve",
      variable: "FLEET_SERVE_NODE_FLAGS",
      node: "v22.13.0",
      restarts: false,
      platform: "linux",
      given: false,
      flags: ["--optimize-for-size"],
    });
    expect(old).toMatchObject({ id: "app.node-flags", status: "warn" });
    expect(old.detail).toMatch(/not applied: node v22\.13\.0 has no process\.execve/);
    expect(old.fix).toMatch(/Node 22\.15/);
    // There a variable is not even read: nothing to refuse, the flags just do not apply.
    const windows = nodeFlagsCheck({ ...run, restarts: false, platform: "win32", given: true, flags: [] });
    expect(windows).toMatchObject({ status: "warn", detail: expect.stringMatching(/on Windows/) });
  });

  it("FLEET_PUBLIC_URL: needed only when a repository uses dispatch: actions, and must answer as Fleet", () => {
    expect(publicUrlCheck({ url: undefined, actionsRepos: [], tokenPath: TOKEN_PATH }).status).toBe("ok");
    const missing = publicUrlCheck({ url: undefined, actionsRepos: ["a/b", "a/c"], tokenPath: TOKEN_PATH });
    expect(missing).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("2 installed repositories use"),
    });
    const fleet = { status: 405, body: `{"message":"Use POST ${TOKEN_PATH}."}` };
    expect(
      publicUrlCheck({
        url: "https://fleet.example.com",
        actionsRepos: ["a/b"],
        probe: fleet,
        tokenPath: TOKEN_PATH,
      }),
    ).toMatchObject({ status: "ok" });
    // Some other server (a proxy that forwards only the webhook path, another app) is not Fleet.
    expect(
      publicUrlCheck({
        url: "https://fleet.example.com",
        actionsRepos: [],
        probe: { status: 404, body: "Not Found" },
        tokenPath: TOKEN_PATH,
      }),
    ).toMatchObject({ status: "fail", detail: expect.stringContaining("answered 404") });
    // Plain http is fine on loopback, a warning elsewhere (tokens travel over it).
    expect(
      publicUrlCheck({ url: "http://127.0.0.1:3000", actionsRepos: [], probe: fleet, tokenPath: TOKEN_PATH })
        .status,
    ).toBe("ok");
    expect(
      publicUrlCheck({
        url: "http://fleet.internal:3000",
        actionsRepos: [],
        probe: fleet,
        tokenPath: TOKEN_PATH,
      }).status,
    ).toBe("warn");
  });

  it("a coder: usable with CLI and credential; half set up fails; neither is a warning", () => {
    const cli = { path: "/usr/local/bin/claude", version: "2.1.197 (Claude Code)" };
    expect(coderCheck({ ...CLAUDE, ...cli, credentialFound: "CLAUDE_CODE_OAUTH_TOKEN" })).toMatchObject({
      status: "ok",
      detail: "claude 2.1.197 (Claude Code), credential CLAUDE_CODE_OAUTH_TOKEN set",
    });
    expect(coderCheck({ ...CLAUDE, ...cli })).toMatchObject({
      status: "fail",
      fix: expect.stringContaining("set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"),
    });
    expect(coderCheck({ ...CLAUDE, credentialFound: "ANTHROPIC_API_KEY" })).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("claude not found on PATH"),
      fix: "install it: `npm install -g @anthropic-ai/claude-code`",
    });
    // Where a run looks too: PATH, then Fleet's own install.
    expect(
      coderCheck({
        ...CLAUDE,
        credentialFound: "ANTHROPIC_API_KEY",
        fleetBin: "/opt/fleet/node_modules/.bin",
      }).detail,
    ).toContain("claude not found on PATH or in Fleet's install (/opt/fleet/node_modules/.bin)");
    expect(
      coderCheck({
        ...CLAUDE,
        path: "/opt/fleet/node_modules/.bin/claude",
        version: "2.1.197",
        installedWithFleet: true,
        credentialFound: "ANTHROPIC_API_KEY",
      }),
    ).toMatchObject({
      status: "ok",
      detail: "claude 2.1.197 (installed with Fleet), credential ANTHROPIC_API_KEY set",
    });
    expect(
      coderCheck({
        ...CLAUDE,
        path: "/x/claude",
        runError: "exit 127: no node",
        credentialFound: "ANTHROPIC_API_KEY",
      }),
    ).toMatchObject({ status: "fail", detail: expect.stringContaining("does not run (exit 127") });
    const neither = coderCheck({ coder: "agy", binary: "agy", credentialNames: ["GEMINI_API_KEY"] });
    expect(neither).toMatchObject({
      status: "warn",
      fix: expect.stringContaining("coders: { agy: { enabled: false } }"),
    });
  });

  it("no usable coder fails; an unusable default coder warns", () => {
    const ok = coderCheck({ ...CLAUDE, path: "/c", version: "1", credentialFound: "ANTHROPIC_API_KEY" });
    const agy = coderCheck({ coder: "agy", binary: "agy", credentialNames: ["GEMINI_API_KEY"] });
    expect(codersSummary([agy], "claude")).toMatchObject({ id: "coder.any", status: "fail" });
    expect(codersSummary([ok, agy], "claude")).toBeUndefined();
    expect(codersSummary([ok, agy], "agy")).toMatchObject({ id: "coder.default", status: "warn" });
  });

  it("GitHub's refusals of the app say what to check", () => {
    expect(appAuthFix(401)).toMatch(/APP_ID and the private key must be the same app's/);
    expect(appAuthFix(404)).toMatch(/GHE_HOST/);
    expect(appAuthFix(undefined)).toMatch(/reach GitHub's API/);
    expect(
      appPermissionsCheck({ contents: "write", issues: "write", pull_requests: "write", actions: "write" })
        .status,
    ).toBe("ok");
    expect(appPermissionsCheck({ contents: "read", issues: "write", pull_requests: "write" }).detail).toBe(
      "the app lacks contents: write, actions: write",
    );
  });

  it("the state branch: absent is fine, unreadable or corrupt fails with the way out", () => {
    expect(stateCheck("o/r", "fleet/state", { tasks: 0, exists: false }).detail).toMatch(/not there yet/);
    expect(stateCheck("o/r", "fleet/state", { tasks: 2, exists: true }).detail).toBe(
      "fleet/state read: 2 tasks",
    );
    expect(stateCheck("o/r", "fleet/state", { error: "x", corrupt: true }).fix).toMatch(
      /revert the last commit/,
    );
    expect(stateCheck("o/r", "fleet/state", { error: "x", status: 403 }).fix).toMatch(
      /Contents read and write/,
    );
  });
});
