import { describe, expect, it } from "vitest";
import {
  applyOverrides,
  CONFIG_KEYS,
  checkOverride,
  FILE_ONLY_KEYS,
  type FleetConfig,
  parseConfigAssignment,
  parseFleetConfig,
  resolveOverrides,
  updateOverrides,
} from "../../src/core/config.ts";

const file = (input: unknown): FleetConfig => {
  const r = parseFleetConfig(input);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
};

describe("config set may change operational keys only", () => {
  it("refuses every file-only key whatever its value, saying it is file-only and where to set it", () => {
    for (const text of [
      "allowed_roles=read",
      "coders.claude.credentials=GITHUB_TOKEN",
      "dispatch=local",
      "runner_labels=ubuntu-latest",
      "workflow=other.yml",
      "sandbox=none",
      "auto_label_discovered=true",
    ]) {
      const r = parseConfigAssignment(text);
      expect(r.ok, text).toBe(false);
      if (r.ok) continue;
      expect(r.message).toContain(`${text.split("=")[0]} is file-only`);
      expect(r.message).toContain(".github/fleet.yml on the default branch");
    }
    expect(parseConfigAssignment("coders.claude.credentials=GITHUB_TOKEN")).toMatchObject({
      message: expect.stringContaining("which secrets an agent receives"),
    });
    expect(parseConfigAssignment("allowed_roles=read")).toMatchObject({
      message: expect.stringContaining("who may drive Fleet"),
    });
  });

  it("lists file-only keys apart from the settable ones", () => {
    expect(FILE_ONLY_KEYS).toEqual(
      expect.arrayContaining([
        "allowed_roles",
        "coders.<coder>.credentials",
        "dispatch",
        "runner_labels",
        "workflow",
        "sandbox",
      ]),
    );
    for (const k of FILE_ONLY_KEYS) expect(CONFIG_KEYS).not.toContain(k);
    expect(CONFIG_KEYS).toEqual(
      expect.arrayContaining([
        "max_concurrent",
        "budgets.daily_usd",
        "coders.<coder>.model",
        "plan_approval",
      ]),
    );
  });

  it("lowers budgets and the per-user guard, never raises them above the file", () => {
    const f = file({
      budgets: { daily_usd: 10, per_coder: { claude: { per_task_usd: 2 } } },
      per_user_daily_tasks: 5,
    });
    expect(checkOverride(f, "budgets.daily_usd", 5)).toBeUndefined();
    expect(checkOverride(f, "budgets.daily_usd", 10)).toBeUndefined();
    expect(checkOverride(f, "budgets.daily_usd", 50)).toBe(
      "budgets.daily_usd can only be lowered with config set: .github/fleet.yml on the default branch sets 10, and 50 is above it. Raise it in the file.",
    );
    expect(checkOverride(f, "budgets.per_coder.claude.per_task_usd", 3)).toContain("can only be lowered");
    expect(checkOverride(f, "per_user_daily_tasks", 6)).toContain("can only be lowered");
    // A limit the file does not set is a new limit: tighter than none.
    expect(checkOverride(f, "budgets.monthly_usd", 1000)).toBeUndefined();
    expect(checkOverride(f, "budgets.daily_usd", null)).toBeUndefined();
  });

  it("lowers max_follow_ups (to 0: none filed), never raises it above the file or its default", () => {
    expect(file({}).max_follow_ups).toBe(5);
    expect(file({ max_follow_ups: 0 }).max_follow_ups).toBe(0);
    expect(parseFleetConfig({ max_follow_ups: -1 }).ok).toBe(false);
    expect(parseConfigAssignment("max_follow_ups=2")).toMatchObject({ ok: true, value: 2 });
    expect(checkOverride(file({}), "max_follow_ups", 2)).toBeUndefined();
    expect(checkOverride(file({}), "max_follow_ups", 0)).toBeUndefined();
    expect(checkOverride(file({}), "max_follow_ups", 6)).toBe(
      "max_follow_ups can only be lowered with config set: .github/fleet.yml on the default branch sets 5, and 6 is above it. Raise it in the file.",
    );
    expect(checkOverride(file({ max_follow_ups: 20 }), "max_follow_ups", 20)).toBeUndefined();
  });

  it("picks models within the file's list, narrows the list, and turns coders off but not on", () => {
    const f = file({
      coders: { claude: { model: "sonnet", models: ["sonnet", "opus"] }, codex: { enabled: false } },
    });
    expect(checkOverride(f, "coders.claude.model", "opus")).toBeUndefined();
    expect(checkOverride(f, "coders.claude.model", "haiku")).toContain("not a model .github/fleet.yml");
    expect(checkOverride(f, "coders.claude.models", ["opus"])).toBeUndefined();
    expect(checkOverride(f, "coders.claude.models", ["opus", "haiku"])).toContain("haiku");
    expect(checkOverride(f, "coders.claude.enabled", false)).toBeUndefined();
    expect(checkOverride(f, "coders.codex.enabled", true)).toContain('turning coder "codex" on is file-only');
    expect(checkOverride(f, "coders.claude.enabled", true)).toBeUndefined();
    expect(checkOverride(f, "coders.ghost.max_concurrent", 1)).toContain("adding a coder is file-only");
  });
});

describe("resolveOverrides: the effective config", () => {
  it("drops only the override that no longer fits the file, with the reason, and keeps the others", () => {
    const before = file({ budgets: { daily_usd: 50 } });
    const stored = { max_concurrent: 7, "budgets.daily_usd": 20, plan_approval: true };
    expect(resolveOverrides(before, stored).dropped).toEqual([]);
    // The file lowers the budget below the override: the override would raise it now.
    const after = file({ budgets: { daily_usd: 10 } });
    const r = resolveOverrides(after, stored);
    expect(r.dropped).toEqual([
      { key: "budgets.daily_usd", value: "20", message: expect.stringContaining("can only be lowered") },
    ]);
    expect(r.config.max_concurrent).toBe(7);
    expect(r.config.plan_approval).toBe(true);
    expect(r.config.budgets.daily_usd).toBe(10);
    expect(r.applied).toEqual({ max_concurrent: 7, plan_approval: true });
  });

  it("drops file-only keys an older Fleet stored, and bad values, one by one", () => {
    const r = resolveOverrides(file({}), {
      allowed_roles: ["read"],
      "coders.claude.credentials": ["GITHUB_TOKEN"],
      dispatch: "local",
      max_concurrent: "lots",
      retries: 1,
      "timeouts.run_minutes": 30,
    });
    expect(r.dropped.map((d) => d.key)).toEqual([
      "allowed_roles",
      "coders.claude.credentials",
      "dispatch",
      "max_concurrent",
      "retries",
    ]);
    expect(r.config.allowed_roles).toEqual(["admin", "maintain", "write"]);
    expect(r.config.coders.claude?.credentials).toEqual(["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"]);
    expect(r.config.timeouts.run_minutes).toBe(30);
  });

  it("keeps overrides in stored order while the whole config stays valid", () => {
    // default_coder=codex was fine until the file turned codex off.
    const r = resolveOverrides(file({ coders: { codex: { enabled: false } } }), {
      default_coder: "codex",
      max_concurrent: 4,
    });
    expect(r.dropped.map((d) => d.key)).toEqual(["default_coder"]);
    expect(r.config.default_coder).toBe("claude");
    expect(r.config.max_concurrent).toBe(4);
  });
});

describe("updateOverrides: config set", () => {
  it("is all or nothing, and checks against the file and the stored overrides", () => {
    const f = file({ budgets: { daily_usd: 10 } });
    expect(
      updateOverrides(f, {}, [
        { key: "max_concurrent", value: 5 },
        { key: "budgets.daily_usd", value: 20 },
      ]),
    ).toEqual({
      ok: false,
      problems: [{ path: "budgets.daily_usd", message: expect.stringContaining("lowered") }],
    });
    const ok = updateOverrides(f, { plan_phase: false }, [{ key: "max_concurrent", value: 5 }]);
    expect(ok.ok && ok.overrides).toEqual({ plan_phase: false, max_concurrent: 5 });
    const removed = updateOverrides(f, { plan_phase: false, max_concurrent: 5 }, [
      { key: "max_concurrent", value: null },
    ]);
    expect(removed.ok && removed.overrides).toEqual({ plan_phase: false });
    // A stored override that no longer applies does not block a new one: it is left out, and said so.
    const stale = updateOverrides(f, { "budgets.daily_usd": 30 }, [{ key: "max_concurrent", value: 2 }]);
    expect(stale.ok && stale.overrides).toEqual({ max_concurrent: 2 });
    expect(stale.ok && stale.dropped.map((d) => d.key)).toEqual(["budgets.daily_usd"]);
  });

  it("applyOverrides refuses a file-only key with the same words", () => {
    const r = applyOverrides(file({}), { allowed_roles: "read" });
    expect(r.ok === false && r.problems[0]?.message).toContain("allowed_roles is file-only");
  });
});

describe("sandbox", () => {
  it("defaults to bubblewrap; none must be written in the file", () => {
    expect(file({}).sandbox).toBe("bubblewrap");
    expect(file({ sandbox: "none" }).sandbox).toBe("none");
    const bad = parseFleetConfig({ sandbox: "docker" });
    expect(bad.ok === false && bad.problems[0]).toEqual({
      path: "sandbox",
      message: 'must be one of: bubblewrap, none; got "docker".',
    });
  });
});
