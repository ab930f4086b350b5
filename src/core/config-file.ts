import { parseDocument } from "yaml";
import type { z } from "zod";
import { coderOptionProblems } from "./coder-options.ts";
import { CODERS } from "./coders.ts";
import {
  CODER_NAME,
  type CoderConfig,
  FILE_SCHEMA,
  type FileInput,
  type FleetConfig,
  formAt,
  validKeysAt,
  valueAt,
} from "./config-fields.ts";

/** Built-in coders, one per coder of the registry; a repository's `coders:` entries are merged over these key by key. */
export const DEFAULT_CODERS: Readonly<Record<string, CoderConfig>> = Object.freeze(
  Object.fromEntries(
    Object.values(CODERS).map((c) => [
      c.name,
      { model: c.defaultModel, credentials: [...c.credential.defaults], enabled: true },
    ]),
  ),
);

/** The model a task never given one is recorded with: its coder is not configured, so it is held, never run. */
export const NO_MODEL = "default";

/** The model a task of `coder` runs: the one its label asked for, else the coder's configured model. */
export const modelFor = (config: Pick<FleetConfig, "coders">, coder: string, asked?: string): string =>
  asked ?? config.coders[coder]?.model ?? NO_MODEL;

/** Whether `model` is what a task of `coder` gets anyway, so its label need not name it. */
export const isDefaultModel = (config: Pick<FleetConfig, "coders">, coder: string, model?: string): boolean =>
  !model || model === NO_MODEL || model === config.coders[coder]?.model;

export interface ConfigProblem {
  /** Dotted key path, e.g. "coders.claude.max_concurrent"; "line 3, column 5" for YAML syntax errors. */
  path: string;
  message: string;
}

export type ParseConfigResult =
  | { ok: true; config: FleetConfig; warnings: string[] }
  | { ok: false; problems: ConfigProblem[] };

const TOP_KEYS = validKeysAt([]);

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length]!;
}

/** "Did you mean ...?" for a near miss, or nothing. */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

const describe = (value: unknown): string => {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  const text = JSON.stringify(value) ?? `a ${typeof value}`;
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
};

function problemsFromIssues(issues: readonly z.core.$ZodIssue[], input: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const issue of issues) {
    const path = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      const valid = validKeysAt(path);
      for (const key of issue.keys) {
        const hint = suggest(key, valid);
        problems.push({
          path: [...path, key].join("."),
          message: `unknown key "${key}".${hint ? ` Did you mean "${hint}"?` : ""} Valid keys${
            path.length ? ` under ${path.join(".")}` : ""
          }: ${valid.join(", ")}.`,
        });
      }
      continue;
    }
    const form = formAt(path);
    const got = describe(valueAt(input, issue.path));
    const message = form ? `must be ${form}; got ${got}.` : `${issue.message} (got ${got}).`;
    problems.push({ path: path.length ? path.join(".") : "(root)", message });
  }
  return problems;
}

/** One coder of the file merged over its built-in, or the problem that leaves it out. */
function mergeCoder(name: string, given: Partial<CoderConfig>): CoderConfig | ConfigProblem {
  if (!CODER_NAME.test(name)) {
    return {
      path: `coders.${name}`,
      message: `"${name}" is not a coder name: use lowercase letters, digits, "-" and "_", starting with a letter.`,
    };
  }
  const base = DEFAULT_CODERS[name];
  const model = given.model ?? base?.model ?? given.models?.[0];
  if (model === undefined) {
    return {
      path: `coders.${name}.model`,
      message: `coder "${name}" has no built-in default: set its model.`,
    };
  }
  const coder: CoderConfig = {
    model,
    credentials: given.credentials ?? base?.credentials ?? [],
    enabled: given.enabled ?? base?.enabled ?? true,
  };
  if (given.models) coder.models = given.models;
  if (given.max_concurrent !== undefined) coder.max_concurrent = given.max_concurrent;
  if (given.home !== undefined) coder.home = given.home;
  if (given.options !== undefined) coder.options = given.options;
  return coder;
}

/** The coders: the built-ins with the file's merged over them. */
function mergeCoders(
  raw: FileInput,
  problems: ConfigProblem[],
  warnings: string[],
): Record<string, CoderConfig> {
  const coders: Record<string, CoderConfig> = {};
  for (const [name, base] of Object.entries(DEFAULT_CODERS)) coders[name] = { ...base };
  for (const [name, given] of Object.entries(raw.coders)) {
    const coder = mergeCoder(name, given);
    if ("path" in coder) {
      problems.push(coder);
      continue;
    }
    if (coder.models && !coder.models.includes(coder.model)) {
      problems.push({
        path: `coders.${name}.model`,
        message: `default model "${coder.model}" is not in coders.${name}.models (${coder.models.join(", ")}).`,
      });
    }
    if (coder.max_concurrent !== undefined && coder.max_concurrent > raw.max_concurrent) {
      warnings.push(
        `coders.${name}.max_concurrent (${coder.max_concurrent}) is above max_concurrent (${raw.max_concurrent}); the global cap wins.`,
      );
    }
    for (const [option, message] of coderOptionProblems(name, coder.options ?? {}, raw.network))
      problems.push({ path: `coders.${name}.options.${option}`, message });
    coders[name] = coder;
  }
  return coders;
}

/** The rules between keys: the coders merged, the default coder enabled, budgets for known coders. */
function finish(raw: FileInput): ParseConfigResult {
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const coders = mergeCoders(raw, problems, warnings);
  const enabled = Object.keys(coders).filter((c) => coders[c]!.enabled);
  if (!coders[raw.default_coder]?.enabled) {
    problems.push({
      path: "default_coder",
      message: `"${raw.default_coder}" is not ${coders[raw.default_coder] ? "enabled" : "a configured coder"}; use one of: ${enabled.join(", ") || "(no coder is enabled)"}.`,
    });
  }
  for (const name of Object.keys(raw.budgets.per_coder)) {
    if (!coders[name]) {
      problems.push({
        path: `budgets.per_coder.${name}`,
        message: `"${name}" is not a configured coder; use one of: ${Object.keys(coders).join(", ")}.`,
      });
    }
  }
  if (raw.plan_approval && !raw.plan_phase) {
    warnings.push(
      "plan_approval is on but plan_phase is off: there is no plan to approve, so runs start directly.",
    );
  }
  if (raw.timeouts.stall_minutes > raw.timeouts.run_minutes) {
    warnings.push(
      `timeouts.stall_minutes (${raw.timeouts.stall_minutes}) is above timeouts.run_minutes (${raw.timeouts.run_minutes}); the run timeout fires first.`,
    );
  }
  if (problems.length > 0) return { ok: false, problems };
  const { coders: _given, ...rest } = raw;
  return { ok: true, config: { ...rest, coders }, warnings };
}

/** The file's text as data, or the YAML problems. */
function readYaml(text: string): { ok: true; data: unknown } | { ok: false; problems: ConfigProblem[] } {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      problems: doc.errors.map((e) => {
        const pos = e.linePos?.[0];
        return {
          path: pos ? `line ${pos.line}, column ${pos.col}` : "(yaml)",
          message: `YAML syntax error: ${e.message.split("\n")[0]}`,
        };
      }),
    };
  }
  try {
    return { ok: true, data: doc.toJS() };
  } catch (error) {
    return { ok: false, problems: [{ path: "(yaml)", message: `YAML error: ${(error as Error).message}` }] };
  }
}

/**
 * Validates `.github/fleet.yml` (as YAML text or as an already parsed value) and fills in defaults.
 * Every problem is reported with its key path; unknown keys are errors listing the valid ones.
 * A missing or empty file means all defaults. Never throws.
 */
export function parseFleetConfig(input: unknown): ParseConfigResult {
  let data: unknown = input;
  if (typeof input === "string") {
    const read = readYaml(input);
    if (!read.ok) return read;
    data = read.data;
  }
  if (data === null || data === undefined) data = {};
  if (typeof data !== "object" || Array.isArray(data)) {
    return {
      ok: false,
      problems: [
        {
          path: "(root)",
          message: `the file must be a mapping of settings (got ${describe(data)}). Valid keys: ${TOP_KEYS.join(", ")}.`,
        },
      ],
    };
  }
  const parsed = FILE_SCHEMA.safeParse(data);
  if (!parsed.success) return { ok: false, problems: problemsFromIssues(parsed.error.issues, data) };
  // The schema is read from the same table as the type.
  return finish(parsed.data as FileInput);
}

/** The defaults, as a repository without `.github/fleet.yml` gets them. */
export function defaultFleetConfig(): FleetConfig {
  const r = parseFleetConfig({});
  if (!r.ok) throw new Error(`built-in defaults are invalid: ${JSON.stringify(r.problems)}`);
  return r.config;
}
