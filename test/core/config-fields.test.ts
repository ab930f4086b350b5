import { describe, expect, expectTypeOf, it } from "vitest";
import type { CoderOptions } from "../../src/core/coder-options.ts";
import {
  CONFIG_KEYS,
  defaultFleetConfig,
  FILE_ONLY_KEYS,
  type FleetConfig,
  parseConfigAssignment,
  parseFleetConfig,
} from "../../src/core/config.ts";
import {
  CONFIG_FIELDS,
  type FieldNode,
  type Fields,
  formAt,
  SETTABLE_KEYS,
  settableAt,
  validKeysAt,
} from "../../src/core/config-fields.ts";

/** Every leaf of the table, as a dotted path with `<coder>` for a coder's name. */
function leaves(fields: Fields, prefix = ""): Array<[string, FieldNode]> {
  return Object.entries(fields).flatMap(([key, node]): Array<[string, FieldNode]> => {
    const path = `${prefix}${key}`;
    if ("value" in node) return [[path, node]];
    if ("group" in node) return leaves(node.group, `${path}.`);
    return leaves(node.perCoder, `${path}.<coder>.`);
  });
}

describe("the field table", () => {
  it("is where every key of the file, every settable and every file-only key comes from", () => {
    const all = leaves(CONFIG_FIELDS).map(([path]) => path);
    expect([...CONFIG_KEYS, ...FILE_ONLY_KEYS].sort()).toEqual([...all].sort());
    for (const k of FILE_ONLY_KEYS) expect(CONFIG_KEYS).not.toContain(k);
    expect(validKeysAt([])).toEqual(Object.keys(CONFIG_FIELDS));
  });

  it("lists the repository-wide keys first for config set, then the per-coder ones", () => {
    expect(CONFIG_KEYS[0]).toBe("max_concurrent");
    const firstPerCoder = CONFIG_KEYS.findIndex((k) => k.includes("<coder>"));
    expect(CONFIG_KEYS.slice(firstPerCoder).every((k) => k.includes("<coder>"))).toBe(true);
  });

  it("gives every key with a default its default in defaultFleetConfig", () => {
    const config = defaultFleetConfig() as unknown as Record<string, unknown>;
    for (const [path, node] of leaves(CONFIG_FIELDS)) {
      if (!("value" in node) || node.has !== "default") continue;
      const value = path.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown>)?.[k], config);
      expect(value, path).toEqual(node.default);
      expect(node.value.schema.safeParse(node.default).success, path).toBe(true);
    }
  });

  it("lets `none` remove exactly the overrides of keys without a default", () => {
    for (const spec of SETTABLE_KEYS) expect(spec.unsettable, spec.pattern).toBe(spec.leaf.has === "none");
    expect(
      SETTABLE_KEYS.filter((s) => s.unsettable && s.leaf.set.scope === "override").map((s) => s.pattern),
    ).toEqual([
      "budgets.daily_usd",
      "budgets.monthly_usd",
      "per_user_daily_tasks",
      "cross_review",
      "max_context_pct",
      "limits.cpus",
      "coders.<coder>.models",
      "coders.<coder>.max_concurrent",
      "budgets.per_coder.<coder>.per_task_tokens",
      "budgets.per_coder.<coder>.per_task_usd",
      "budgets.per_coder.<coder>.daily_usd",
      "budgets.per_coder.<coder>.monthly_usd",
    ]);
  });

  it("finds a key by its parts, a coder's name standing for <coder>", () => {
    expect(settableAt("coders.claude.model")).toMatchObject({
      spec: { pattern: "coders.<coder>.model" },
      coder: "claude",
    });
    expect(settableAt("budgets.per_coder.codex.daily_usd")?.coder).toBe("codex");
    expect(settableAt("max_concurrent")).toMatchObject({ spec: { pattern: "max_concurrent" } });
    expect(settableAt("max_concurrent")?.coder).toBeUndefined();
    for (const key of [
      "coders.Claude.model",
      "coders.<coder>.model",
      "timeouts",
      "coders.claude",
      "nope",
      "toString",
    ])
      expect(settableAt(key), key).toBeUndefined();
  });

  it("says what a value or a list's item must be, by path", () => {
    expect(formAt(["max_concurrent"])).toBe("a whole number from 1 to 100");
    expect(formAt(["coders", "x", "models"])).toBe("a non-empty list of model ids");
    expect(formAt(["coders", "x", "models", "0"])).toContain("a model id (letters");
    expect(formAt(["allowed_roles", "0"])).toContain("a non-empty list of roles");
    expect(formAt(["budgets", "per_coder", "x", "daily_usd"])).toBe("an amount in US dollars above 0");
    expect(formAt(["coders", "x"])).toBeUndefined();
    expect(formAt(["timeouts"])).toBeUndefined();
    expect(validKeysAt(["budgets"])).toEqual([
      "per_task_tokens",
      "per_task_usd",
      "daily_usd",
      "monthly_usd",
      "per_coder",
    ]);
    expect(validKeysAt(["coders", "x"])).toEqual([
      "model",
      "models",
      "max_concurrent",
      "credentials",
      "enabled",
      "home",
      "options",
    ]);
    expect(validKeysAt(["coders"])).toEqual([]);
  });

  it("says the same words for a coder's models in the file and in config set", () => {
    const file = parseFleetConfig({ coders: { claude: { models: [] } } });
    expect(file.ok === false && file.problems[0]?.message).toBe(
      "must be a non-empty list of model ids; got a list.",
    );
    expect(parseConfigAssignment("coders.claude.models=")).toEqual({
      ok: false,
      key: "coders.claude.models",
      message:
        'coders.claude.models must be a non-empty list of model ids (or "none" to remove the override); got "".',
    });
  });

  it("types FleetConfig from the table: keys with a default always there, the others optional", () => {
    expectTypeOf<FleetConfig["max_concurrent"]>().toEqualTypeOf<number>();
    expectTypeOf<FleetConfig["dispatch"]>().toEqualTypeOf<"actions" | "local">();
    expectTypeOf<FleetConfig["allowed_roles"]>().toEqualTypeOf<
      Array<"admin" | "maintain" | "write" | "triage" | "read">
    >();
    expectTypeOf<FleetConfig["timeouts"]>().toEqualTypeOf<{ run_minutes: number; stall_minutes: number }>();
    expectTypeOf<FleetConfig["per_user_daily_tasks"]>().toEqualTypeOf<number | undefined>();
    expectTypeOf<FleetConfig["budgets"]["daily_usd"]>().toEqualTypeOf<number | undefined>();
    expectTypeOf<FleetConfig["budgets"]["per_coder"][string]["monthly_usd"]>().toEqualTypeOf<
      number | undefined
    >();
    expectTypeOf<FleetConfig["coders"][string]>().toEqualTypeOf<{
      model: string;
      credentials: string[];
      enabled: boolean;
      models?: string[];
      max_concurrent?: number;
      home?: "isolated" | "inherit";
      options?: CoderOptions;
    }>();
    expectTypeOf<FleetConfig["max_context_pct"]>().toEqualTypeOf<number | undefined>();
  });
});
