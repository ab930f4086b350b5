import { describe, expect, it } from "vitest";
import {
  applyOverrides,
  CONFIG_KEYS,
  type ConfigProblem,
  defaultFleetConfig,
  type FleetConfig,
  parseConfigAssignment,
  parseFleetConfig,
} from "../../src/core/config.ts";

const ok = (input: unknown): { config: FleetConfig; warnings: string[] } => {
  const r = parseFleetConfig(input);
  if (!r.ok) throw new Error(`expected ok, got ${JSON.stringify(r.problems)}`);
  return r;
};
const problems = (input: unknown): ConfigProblem[] => {
  const r = parseFleetConfig(input);
  if (r.ok) throw new Error("expected problems");
  return r.problems;
};

describe("parseFleetConfig defaults", () => {
  it.each<[unknown, string]>([
    ["", "empty text"],
    [null, "null"],
    [undefined, "undefined"],
    [{}, "empty object"],
    ["# only a comment\n", "comment"],
  ])("fills every default from %j (%s)", (input) => {
    const { config, warnings } = ok(input);
    expect(warnings).toEqual([]);
    expect(config).toEqual({
      coders: {
        claude: {
          model: "sonnet",
          credentials: ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
          enabled: true,
        },
        codex: { model: "gpt-5-codex", credentials: ["OPENAI_API_KEY"], enabled: true },
        agy: { model: "gemini-2.5-pro", credentials: ["GEMINI_API_KEY"], enabled: true },
        gemini: { model: "gemini-2.5-pro", credentials: ["GEMINI_API_KEY"], enabled: true },
        opencode: { model: "claude-sonnet-4-5", credentials: ["ANTHROPIC_API_KEY"], enabled: true },
      },
      default_coder: "claude",
      max_concurrent: 3,
      dispatch: "actions",
      runner_labels: ["self-hosted", "fleet"],
      timeouts: { run_minutes: 60, stall_minutes: 10 },
      plan_phase: true,
      plan_approval: false,
      retries: { max: 2, backoff_seconds: 60 },
      review_on: [],
      review_paths: [],
      budgets: { per_task_tokens: 10_000_000, per_task_usd: 25, per_coder: {} },
      runaway: { repeated_tool_calls: 5, idle_turns: 40 },
      credential_near_limit_pct: 90,
      allowed_roles: ["admin", "maintain", "write"],
      serialize_overlapping: false,
      auto_label_discovered: false,
      max_follow_ups: 5,
      workflow: "fleet-task.yml",
      dashboard: false,
      dashboard_interval_seconds: 60,
      setup: [],
      setup_cache: [],
      network: "proxy",
      limits: { memory_mb: 8192, pids: 1024 },
      allow_workflow_changes: false,
      draft_pr: false,
      ask_human: { enabled: true, expire_after_hours: 72 },
      sandbox: "bubblewrap",
    });
  });

  it("defaultFleetConfig returns the same defaults", () => {
    expect(defaultFleetConfig()).toEqual(ok({}).config);
  });
});

describe("parseFleetConfig values", () => {
  it("merges coder settings over the built-ins and accepts new coders", () => {
    const { config } = ok(`
max_concurrent: 5
coders:
  claude:
    model: opus
    max_concurrent: 2
  codex:
    enabled: false
  gemini:
    model: gemini-2.5-flash
    credentials: [GEMINI_API_KEY]
budgets:
  daily_usd: 25
  per_coder:
    claude: { monthly_usd: 300 }
per_user_daily_tasks: 10
`);
    expect(config.max_concurrent).toBe(5);
    expect(config.coders.claude).toEqual({
      model: "opus",
      max_concurrent: 2,
      credentials: ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
      enabled: true,
    });
    expect(config.coders.codex?.enabled).toBe(false);
    expect(config.coders.codex?.model).toBe("gpt-5-codex");
    expect(config.coders.gemini).toEqual({
      model: "gemini-2.5-flash",
      credentials: ["GEMINI_API_KEY"],
      enabled: true,
    });
    expect(config.budgets).toEqual({
      per_task_tokens: 10_000_000,
      per_task_usd: 25,
      daily_usd: 25,
      per_coder: { claude: { monthly_usd: 300 } },
    });
    expect(config.per_user_daily_tasks).toBe(10);
  });

  it("a new coder without a model takes the first allowed model, or is an error", () => {
    expect(ok({ coders: { x: { models: ["m1", "m2"] } } }).config.coders.x?.model).toBe("m1");
    expect(problems({ coders: { x: { enabled: true } } })).toEqual([
      { path: "coders.x.model", message: 'coder "x" has no built-in default: set its model.' },
    ]);
  });

  it("lists every problem with its key path", () => {
    const ps = problems(`
max_concurrent: 0
dispatch: cloud
coders:
  claude:
    max_concurrent: "two"
    credentials: [sk-ant-abc123]
timeouts:
  run_minutes: 1.5
allowed_roles: [owner]
workflow: fleet.sh
`);
    const byPath = Object.fromEntries(ps.map((p) => [p.path, p.message]));
    expect(byPath.max_concurrent).toBe("must be a whole number from 1 to 100; got 0.");
    expect(byPath.dispatch).toBe('must be one of: actions, local; got "cloud".');
    expect(byPath["coders.claude.max_concurrent"]).toBe('must be a whole number from 1 to 100; got "two".');
    expect(byPath["coders.claude.credentials.0"]).toContain("NAMES");
    expect(byPath["timeouts.run_minutes"]).toBe("must be a whole number from 1 to 1440; got 1.5.");
    expect(byPath["allowed_roles.0"]).toContain("admin, maintain, write, triage, read");
    expect(byPath.workflow).toContain(".yml or .yaml");
    expect(ps).toHaveLength(7);
  });

  it("reports unknown keys at every level with the valid keys and a suggestion", () => {
    const ps = problems({
      max_concurent: 3,
      colour: "red",
      timeouts: { run: 5 },
      coders: { claude: { modle: "x" } },
    });
    const byPath = Object.fromEntries(ps.map((p) => [p.path, p.message]));
    expect(byPath.max_concurent).toMatch(
      /^unknown key "max_concurent"\. Did you mean "max_concurrent"\? Valid keys: coders, /,
    );
    expect(byPath.colour).not.toContain("Did you mean");
    expect(byPath.colour).toContain("workflow");
    expect(byPath["timeouts.run"]).toContain("Valid keys under timeouts: run_minutes, stall_minutes.");
    expect(byPath["coders.claude.modle"]).toContain('Did you mean "model"?');
  });

  it("checks cross-field rules", () => {
    expect(problems({ default_coder: "gpt" })[0]).toEqual({
      path: "default_coder",
      message: '"gpt" is not a configured coder; use one of: claude, codex, agy, gemini, opencode.',
    });
    expect(problems({ coders: { claude: { enabled: false } } })[0]?.message).toBe(
      '"claude" is not enabled; use one of: codex, agy, gemini, opencode.',
    );
    expect(problems({ budgets: { per_coder: { nobody: { daily_usd: 1 } } } })[0]?.path).toBe(
      "budgets.per_coder.nobody",
    );
    expect(problems({ coders: { claude: { model: "opus", models: ["sonnet"] } } })[0]?.path).toBe(
      "coders.claude.model",
    );
    expect(problems({ coders: { Bad: { model: "m" } } })[0]?.path).toBe("coders.Bad");
  });

  it("warns about settings that have no effect", () => {
    const { warnings } = ok({
      plan_phase: false,
      plan_approval: true,
      coders: { claude: { max_concurrent: 9 } },
      timeouts: { run_minutes: 5, stall_minutes: 10 },
    });
    expect(warnings).toHaveLength(3);
    expect(warnings.join("\n")).toContain("plan_approval is on but plan_phase is off");
    expect(warnings.join("\n")).toContain("coders.claude.max_concurrent (9) is above max_concurrent (3)");
    expect(warnings.join("\n")).toContain("stall_minutes (10) is above timeouts.run_minutes (5)");
  });

  it("reports YAML syntax errors with line and column", () => {
    const ps = problems("max_concurrent: 3\nrunner_labels: [a,\ncoders: x: y\n");
    expect(ps.length).toBeGreaterThan(0);
    expect(ps[0]?.path).toMatch(/^line \d+, column \d+$/);
    expect(ps[0]?.message).toMatch(/^YAML syntax error: /);
  });

  it("reports duplicate keys as YAML errors", () => {
    expect(problems("max_concurrent: 3\nmax_concurrent: 4\n")[0]?.path).toBe("line 2, column 1");
  });

  it("rejects a file that is not a mapping", () => {
    expect(problems("- a\n- b\n")[0]).toMatchObject({ path: "(root)" });
    expect(problems(42)[0]?.message).toContain("must be a mapping of settings (got 42)");
  });

  it("never throws on hostile input", () => {
    for (const input of [
      "{{{{",
      "\t\tx",
      "a: &a [*a]",
      "!!binary x",
      Symbol("x"),
      () => 1,
      [1],
      "x: !!js/function f",
    ]) {
      expect(() => parseFleetConfig(input)).not.toThrow();
    }
  });
});

describe("parseConfigAssignment", () => {
  it("reads typed values", () => {
    expect(parseConfigAssignment("max_concurrent=5")).toEqual({ ok: true, key: "max_concurrent", value: 5 });
    expect(parseConfigAssignment(" plan_approval = yes ")).toEqual({
      ok: true,
      key: "plan_approval",
      value: true,
    });
    expect(parseConfigAssignment("coders.agy.model=opus")).toEqual({
      ok: true,
      key: "coders.agy.model",
      value: "opus",
    });
    expect(parseConfigAssignment("budgets.daily_usd=12.5")).toEqual({
      ok: true,
      key: "budgets.daily_usd",
      value: 12.5,
    });
    expect(parseConfigAssignment("coders.claude.models=opus, sonnet")).toEqual({
      ok: true,
      key: "coders.claude.models",
      value: ["opus", "sonnet"],
    });
    expect(parseConfigAssignment("budgets.per_coder.codex.daily_usd=none")).toEqual({
      ok: true,
      key: "budgets.per_coder.codex.daily_usd",
      value: null,
    });
  });

  it("rejects bad values with the valid range", () => {
    expect(parseConfigAssignment("max_concurrent=0")).toEqual({
      ok: false,
      key: "max_concurrent",
      message: 'max_concurrent must be a whole number from 1 to 100; got "0".',
    });
    expect(parseConfigAssignment("max_concurrent=lots")).toMatchObject({ ok: false });
    expect(parseConfigAssignment("max_concurrent=none")).toMatchObject({ ok: false });
    expect(parseConfigAssignment("plan_approval=maybe")).toMatchObject({
      message: 'plan_approval must be true or false; got "maybe".',
    });
    expect(parseConfigAssignment("coders.claude.max_concurrent=-1")).toMatchObject({
      message:
        'coders.claude.max_concurrent must be a whole number from 1 to 100 (or "none" to remove the override); got "-1".',
    });
    expect(parseConfigAssignment("timeouts.run_minutes=")).toMatchObject({
      message: "No value for timeouts.run_minutes: it must be a whole number from 1 to 1440.",
    });
    expect(parseConfigAssignment("coders.claude.credentials=sk-ant-123")).toMatchObject({ ok: false });
  });

  it("rejects unknown keys listing the valid ones", () => {
    const r = parseConfigAssignment("max_concurent=5");
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.message).toContain('"max_concurent" is not a settable key. Did you mean "max_concurrent"?');
    for (const k of CONFIG_KEYS) expect(r.message).toContain(k);
    expect(parseConfigAssignment("coders.Claude.model=x")).toMatchObject({ ok: false });
  });

  it("rejects text that is not an assignment", () => {
    expect(parseConfigAssignment("max_concurrent 5")).toMatchObject({
      ok: false,
      message: expect.stringContaining("write key=value"),
    });
    expect(parseConfigAssignment("=5")).toMatchObject({
      ok: false,
      message: expect.stringContaining('No key before "="'),
    });
  });

  it("CONFIG_KEYS covers the documented keys", () => {
    for (const k of [
      "max_concurrent",
      "coders.<coder>.max_concurrent",
      "default_coder",
      "coders.<coder>.model",
      "budgets.daily_usd",
      "budgets.monthly_usd",
      "plan_approval",
    ]) {
      expect(CONFIG_KEYS).toContain(k);
    }
  });
});

describe("applyOverrides", () => {
  const base = defaultFleetConfig();

  it("applies and re-validates", () => {
    const r = applyOverrides(base, {
      max_concurrent: "10",
      "coders.agy.model": "opus",
      "budgets.daily_usd": "5",
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.max_concurrent).toBe(10);
    expect(r.config.coders.agy?.model).toBe("opus");
    expect(r.config.budgets.daily_usd).toBe(5);
    expect(base.max_concurrent).toBe(3);
  });

  it("turns the dashboard on and sets its throttle, or says what is wrong", () => {
    const r = applyOverrides(base, { dashboard: "true", dashboard_interval_seconds: "0" });
    expect(r.ok && r.config.dashboard).toBe(true);
    expect(r.ok && r.config.dashboard_interval_seconds).toBe(0);
    const bad = applyOverrides(base, { dashboard_interval_seconds: "-1" });
    expect(bad.ok).toBe(false);
  });

  it("none removes an override, never the file's setting", () => {
    const file = ok({ coders: { claude: { max_concurrent: 2 } } }).config;
    const lowered = applyOverrides(file, { "coders.claude.max_concurrent": "1" });
    expect(lowered.ok && lowered.config.coders.claude?.max_concurrent).toBe(1);
    const none = applyOverrides(file, { "coders.claude.max_concurrent": "none" });
    expect(none.ok && none.config.coders.claude?.max_concurrent).toBe(2);
    const budget = ok({ budgets: { daily_usd: 10 } }).config;
    const unset = applyOverrides(budget, { "budgets.daily_usd": "none" });
    expect(unset.ok && unset.config.budgets.daily_usd).toBe(10);
  });

  it("cannot add a coder: that is the file's", () => {
    const r = applyOverrides(base, { "coders.aider.model": "gpt-5" });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems[0]?.message).toContain('"aider" is not a coder configured in .github/fleet.yml');
  });

  it("reports every bad override and cross-field violations", () => {
    const r = applyOverrides(base, { max_concurrent: "x", nope: "1" });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.path)).toEqual(["max_concurrent", "nope"]);
    const cross = applyOverrides(base, { default_coder: "ghost" });
    expect(cross.ok === false && cross.problems[0]?.path).toBe("default_coder");
  });
});
