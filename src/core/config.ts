import { parseDocument } from "yaml";
import { z } from "zod";

/** Where the repository's configuration lives. */
export const FLEET_CONFIG_PATH = ".github/fleet.yml";

export const REPO_ROLES = ["admin", "maintain", "write", "triage", "read"] as const;
export type RepoRole = (typeof REPO_ROLES)[number];
export const DISPATCH_MODES = ["actions", "local"] as const;
export type DispatchMode = (typeof DISPATCH_MODES)[number];
/** How an agent run is contained: `bubblewrap` (Linux namespaces, the default) or `none` (chosen explicitly). */
export const SANDBOX_MODES = ["bubblewrap", "none"] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

const CODER_NAME = /^[a-z][a-z0-9_-]*$/;
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$/;
// Credentials are named (an env variable or an Actions secret), never written into the file.
const CREDENTIAL_NAME = /^[A-Z_][A-Z0-9_]*$/;
const WORKFLOW_FILE = /^[A-Za-z0-9._-]+\.ya?ml$/;

/** A value's schema plus the words a maintainer needs when it is wrong. */
interface Field {
  schema: z.ZodType;
  form: string;
}

const intField = (min: number, max: number) => ({
  schema: z.number().int().min(min).max(max),
  form: `a whole number from ${min} to ${max}`,
});
const usdField = { schema: z.number().positive().max(1_000_000), form: "an amount in US dollars above 0" };
const tokensField = { schema: z.number().int().positive(), form: "a whole number of tokens above 0" };
const boolField = { schema: z.boolean(), form: "true or false" };
const modelField = {
  schema: z
    .string()
    .regex(MODEL_NAME)
    .refine((s) => !s.includes("..")),
  form: 'a model id (letters, digits, ".", "_", "-", "/"; at most 64 characters)',
};
const credentialsField = {
  schema: z.array(z.string().regex(CREDENTIAL_NAME)),
  form: "a list of secret or environment variable NAMES (e.g. ANTHROPIC_API_KEY), never their values",
};

const F = {
  max_concurrent: intField(1, 100),
  coder_max_concurrent: intField(1, 100),
  default_coder: { schema: z.string().regex(CODER_NAME), form: "the name of a configured coder" },
  dispatch: { schema: z.enum(DISPATCH_MODES), form: `one of: ${DISPATCH_MODES.join(", ")}` },
  runner_labels: {
    schema: z.array(z.string().min(1).max(100)).min(1),
    form: "a non-empty list of runner labels (e.g. self-hosted, fleet)",
  },
  run_minutes: intField(1, 1440),
  stall_minutes: intField(1, 1440),
  retries_max: intField(0, 10),
  backoff_seconds: intField(0, 86_400),
  allowed_roles: {
    schema: z.array(z.enum(REPO_ROLES)).min(1),
    form: `a non-empty list of roles from: ${REPO_ROLES.join(", ")}`,
  },
  per_user_daily_tasks: intField(1, 10_000),
  dashboard_interval_seconds: intField(0, 86_400),
  workflow: { schema: z.string().regex(WORKFLOW_FILE), form: "a workflow file name ending in .yml or .yaml" },
  sandbox: { schema: z.enum(SANDBOX_MODES), form: `one of: ${SANDBOX_MODES.join(", ")}` },
} satisfies Record<string, Field>;

const budgetFields = {
  per_task_tokens: tokensField,
  per_task_usd: usdField,
  daily_usd: usdField,
  monthly_usd: usdField,
};

const BudgetLimitsSchema = z.strictObject({
  per_task_tokens: tokensField.schema.optional(),
  per_task_usd: usdField.schema.optional(),
  daily_usd: usdField.schema.optional(),
  monthly_usd: usdField.schema.optional(),
});

const CoderInputSchema = z.strictObject({
  model: modelField.schema.optional(),
  models: z.array(modelField.schema).min(1).optional(),
  max_concurrent: F.coder_max_concurrent.schema.optional(),
  credentials: credentialsField.schema.optional(),
  enabled: boolField.schema.optional(),
});

const FleetConfigInputSchema = z.strictObject({
  coders: z.record(z.string(), CoderInputSchema).optional(),
  default_coder: F.default_coder.schema.default("claude"),
  max_concurrent: F.max_concurrent.schema.default(3),
  dispatch: F.dispatch.schema.default("actions"),
  runner_labels: F.runner_labels.schema.default(["self-hosted", "fleet"]),
  timeouts: z
    .strictObject({
      run_minutes: F.run_minutes.schema.default(60),
      stall_minutes: F.stall_minutes.schema.default(10),
    })
    .prefault({}),
  plan_phase: boolField.schema.default(true),
  plan_approval: boolField.schema.default(false),
  retries: z
    .strictObject({
      max: F.retries_max.schema.default(2),
      backoff_seconds: F.backoff_seconds.schema.default(60),
    })
    .prefault({}),
  budgets: z
    .strictObject({
      ...BudgetLimitsSchema.shape,
      per_coder: z.record(z.string(), BudgetLimitsSchema).default({}),
    })
    .prefault({}),
  allowed_roles: F.allowed_roles.schema.default(["admin", "maintain", "write"]),
  per_user_daily_tasks: F.per_user_daily_tasks.schema.optional(),
  serialize_overlapping: boolField.schema.default(false),
  auto_label_discovered: boolField.schema.default(false),
  workflow: F.workflow.schema.default("fleet-task.yml"),
  dashboard: boolField.schema.default(false),
  dashboard_interval_seconds: F.dashboard_interval_seconds.schema.default(60),
  sandbox: F.sandbox.schema.default("bubblewrap"),
});

export interface CoderConfig {
  /** The model used when a label names none. */
  model: string;
  /** When set, the only models a label may pick. */
  models?: string[];
  /** Per-coder cap; the global max_concurrent still applies. */
  max_concurrent?: number;
  /** Names (never values) of the secrets or environment variables the coder may use, in order of preference. */
  credentials: string[];
  enabled: boolean;
}

export interface BudgetLimits {
  per_task_tokens?: number;
  per_task_usd?: number;
  daily_usd?: number;
  monthly_usd?: number;
}

export interface FleetConfig {
  coders: Record<string, CoderConfig>;
  default_coder: string;
  max_concurrent: number;
  /** `actions` (default): workflow_dispatch onto self-hosted runners; `local`: a worker process claims tasks. */
  dispatch: DispatchMode;
  runner_labels: string[];
  timeouts: { run_minutes: number; stall_minutes: number };
  /** Run a read-only plan phase before the real run. */
  plan_phase: boolean;
  /** Wait for `/fleet approve` after the plan. */
  plan_approval: boolean;
  retries: { max: number; backoff_seconds: number };
  budgets: BudgetLimits & { per_coder: Record<string, BudgetLimits> };
  allowed_roles: RepoRole[];
  per_user_daily_tasks?: number;
  serialize_overlapping: boolean;
  auto_label_discovered: boolean;
  workflow: string;
  /** Keep one pinned dashboard issue per repository current (opt-in: it creates an issue). */
  dashboard: boolean;
  /** At most one dashboard edit per this many seconds (0: every change). */
  dashboard_interval_seconds: number;
  /** How agent runs are contained; `none` must be chosen in the file and is shown on every tracking comment. */
  sandbox: SandboxMode;
}

/** Built-in coders; a repository's `coders:` entries are merged over these key by key. */
export const DEFAULT_CODERS: Readonly<Record<string, CoderConfig>> = Object.freeze({
  claude: { model: "sonnet", credentials: ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"], enabled: true },
  codex: { model: "gpt-5-codex", credentials: ["OPENAI_API_KEY"], enabled: true },
  agy: { model: "gemini-2.5-pro", credentials: ["GEMINI_API_KEY"], enabled: true },
});

export interface ConfigProblem {
  /** Dotted key path, e.g. "coders.claude.max_concurrent"; "line 3, column 5" for YAML syntax errors. */
  path: string;
  message: string;
}

export type ParseConfigResult =
  | { ok: true; config: FleetConfig; warnings: string[] }
  | { ok: false; problems: ConfigProblem[] };

const TOP_KEYS = Object.keys(FleetConfigInputSchema.shape);
const CODER_KEYS = Object.keys(CoderInputSchema.shape);
const BUDGET_KEYS = [...Object.keys(BudgetLimitsSchema.shape), "per_coder"];

function validKeysAt(path: readonly PropertyKey[]): string[] {
  const p = path.map(String);
  if (p.length === 0) return TOP_KEYS;
  if (p.length === 1 && p[0] === "timeouts") return ["run_minutes", "stall_minutes"];
  if (p.length === 1 && p[0] === "retries") return ["max", "backoff_seconds"];
  if (p.length === 1 && p[0] === "budgets") return BUDGET_KEYS;
  if (p.length === 2 && p[0] === "coders") return CODER_KEYS;
  if (p.length === 3 && p[0] === "budgets" && p[1] === "per_coder")
    return Object.keys(BudgetLimitsSchema.shape);
  return [];
}

/** The field description for a dotted path, so value errors can say what is allowed. */
function fieldAt(path: readonly string[]): Field | undefined {
  const key = path.join(".");
  const [head, second, third, fourth] = path;
  if (head === "coders" && path.length === 3) {
    if (third === "model") return modelField;
    if (third === "models")
      return { schema: z.array(modelField.schema), form: `a list of ${modelField.form}s` };
    if (third === "max_concurrent") return F.coder_max_concurrent;
    if (third === "credentials") return credentialsField;
    if (third === "enabled") return boolField;
  }
  if (head === "coders" && path.length === 4 && (third === "models" || third === "credentials")) {
    return third === "models" ? modelField : credentialsField;
  }
  if (head === "budgets" && path.length === 2 && second && second in budgetFields) {
    return budgetFields[second as keyof typeof budgetFields];
  }
  if (head === "budgets" && second === "per_coder" && path.length === 4 && fourth && fourth in budgetFields) {
    return budgetFields[fourth as keyof typeof budgetFields];
  }
  if (head === "allowed_roles" && path.length >= 1) return F.allowed_roles;
  if (head === "runner_labels") return F.runner_labels;
  const simple: Record<string, Field> = {
    max_concurrent: F.max_concurrent,
    default_coder: F.default_coder,
    dispatch: F.dispatch,
    "timeouts.run_minutes": F.run_minutes,
    "timeouts.stall_minutes": F.stall_minutes,
    plan_phase: boolField,
    plan_approval: boolField,
    "retries.max": F.retries_max,
    "retries.backoff_seconds": F.backoff_seconds,
    per_user_daily_tasks: F.per_user_daily_tasks,
    serialize_overlapping: boolField,
    auto_label_discovered: boolField,
    workflow: F.workflow,
    dashboard: boolField,
    dashboard_interval_seconds: F.dashboard_interval_seconds,
    sandbox: F.sandbox,
  };
  return simple[key];
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let node = root;
  for (const k of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<PropertyKey, unknown>)[k];
  }
  return node;
}

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
      const valid = validKeysAt(issue.path);
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
    const field = fieldAt(path);
    const got = describe(valueAt(input, issue.path));
    const message = field ? `must be ${field.form}; got ${got}.` : `${issue.message} (got ${got}).`;
    problems.push({ path: path.length ? path.join(".") : "(root)", message });
  }
  return problems;
}

function finish(raw: z.output<typeof FleetConfigInputSchema>): ParseConfigResult {
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const coders: Record<string, CoderConfig> = {};
  for (const [name, base] of Object.entries(DEFAULT_CODERS)) coders[name] = { ...base };
  for (const [name, given] of Object.entries(raw.coders ?? {})) {
    if (!CODER_NAME.test(name)) {
      problems.push({
        path: `coders.${name}`,
        message: `"${name}" is not a coder name: use lowercase letters, digits, "-" and "_", starting with a letter.`,
      });
      continue;
    }
    const base = DEFAULT_CODERS[name];
    const model = given.model ?? base?.model ?? given.models?.[0];
    if (model === undefined) {
      problems.push({
        path: `coders.${name}.model`,
        message: `coder "${name}" has no built-in default: set its model.`,
      });
      continue;
    }
    const coder: CoderConfig = {
      model,
      credentials: given.credentials ?? base?.credentials ?? [],
      enabled: given.enabled ?? base?.enabled ?? true,
    };
    if (given.models) coder.models = given.models;
    if (given.max_concurrent !== undefined) coder.max_concurrent = given.max_concurrent;
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
    coders[name] = coder;
  }
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
  const { coders: _given, per_user_daily_tasks, ...rest } = raw;
  const config: FleetConfig = { ...rest, coders };
  if (per_user_daily_tasks !== undefined) config.per_user_daily_tasks = per_user_daily_tasks;
  return { ok: true, config, warnings };
}

/**
 * Validates `.github/fleet.yml` (as YAML text or as an already parsed value) and fills in defaults.
 * Every problem is reported with its key path; unknown keys are errors listing the valid ones.
 * A missing or empty file means all defaults. Never throws.
 */
export function parseFleetConfig(input: unknown): ParseConfigResult {
  let data: unknown = input;
  if (typeof input === "string") {
    const doc = parseDocument(input, { prettyErrors: true, uniqueKeys: true });
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
      data = doc.toJS();
    } catch (error) {
      return {
        ok: false,
        problems: [{ path: "(yaml)", message: `YAML error: ${(error as Error).message}` }],
      };
    }
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
  const parsed = FleetConfigInputSchema.safeParse(data);
  if (!parsed.success) return { ok: false, problems: problemsFromIssues(parsed.error.issues, data) };
  return finish(parsed.data);
}

/** The defaults, as a repository without `.github/fleet.yml` gets them. */
export function defaultFleetConfig(): FleetConfig {
  const r = parseFleetConfig({});
  if (!r.ok) throw new Error(`built-in defaults are invalid: ${JSON.stringify(r.problems)}`);
  return r.config;
}

// ---- `/fleet config set k=v` and `fleet config set k=v` ----
//
// An override is stored in the repository state by anyone who may drive Fleet, and wins over the file.
// So it may change how Fleet schedules, waits and spends (within what the file allows), never who may
// drive Fleet, which secrets an agent receives, where its code runs or how it is contained: those come
// only from .github/fleet.yml on the default branch, a reviewed commit like any other. Each key below
// says which it is and why.

type ValueKind = "int" | "number" | "boolean" | "string" | "list";

export type ConfigValue = number | boolean | string | string[] | null;

/** A problem with an override measured against the file config, or undefined when it is within it. */
type Within = (
  file: FleetConfig,
  value: ConfigValue,
  at: { key: string; coder?: string },
) => string | undefined;

interface SettableKey {
  /** Key as written, with `<coder>` standing for a coder name. */
  key: string;
  kind: ValueKind;
  field: Field;
  /** Whether `none` removes the override (the file's value applies again). */
  unsettable: boolean;
  /** `override`: `config set` may change it (within `within`); `file`: only `.github/fleet.yml` may. */
  scope: "override" | "file";
  /** Why the key has its scope: the refusal of a file-only key says it. */
  why: string;
  within?: Within;
}

const FILE_HOME = `${FLEET_CONFIG_PATH} on the default branch`;

const operational = (
  key: string,
  kind: ValueKind,
  field: Field,
  why: string,
  opts: { unsettable?: boolean; within?: Within } = {},
): SettableKey => ({
  key,
  kind,
  field,
  unsettable: opts.unsettable ?? false,
  scope: "override",
  why,
  ...opts,
});

const fileOnly = (key: string, kind: ValueKind, field: Field, why: string): SettableKey => ({
  key,
  kind,
  field,
  unsettable: false,
  scope: "file",
  why,
});

/** The coder must be one the file (or the built-ins) configures: adding a coder is file-only. */
const configuredCoder: Within = (file, _value, { coder }) =>
  coder !== undefined && !file.coders[coder]
    ? `"${coder}" is not a coder configured in ${FILE_HOME} (or built in); adding a coder is file-only. Configured coders: ${Object.keys(file.coders).join(", ")}.`
    : undefined;

const both =
  (...checks: Within[]): Within =>
  (file, value, at) => {
    for (const check of checks) {
      const problem = check(file, value, at);
      if (problem) return problem;
    }
    return undefined;
  };

/** Limits that guard spending may only be tightened: at most the file's value when the file sets one. */
const atMostFile =
  (fileValue: (file: FleetConfig, coder: string | undefined) => number | undefined): Within =>
  (file, value, { key, coder }) => {
    const limit = fileValue(file, coder);
    if (limit === undefined || typeof value !== "number" || value <= limit) return undefined;
    return `${key} can only be lowered with config set: ${FILE_HOME} sets ${limit}, and ${value} is above it. Raise it in the file.`;
  };

const budgetOf =
  (name: keyof BudgetLimits) =>
  (file: FleetConfig, coder: string | undefined): number | undefined =>
    coder === undefined ? file.budgets[name] : file.budgets.per_coder[coder]?.[name];

/** A model the file allows for the coder (any model when the file lists none). */
const allowedModel: Within = (file, value, { coder }) => {
  const allowed = coder === undefined ? undefined : file.coders[coder]?.models;
  const wanted = Array.isArray(value) ? value : [String(value)];
  const outside = allowed ? wanted.filter((m) => !allowed.includes(m)) : [];
  return outside.length
    ? `${outside.join(", ")} is not a model ${FILE_HOME} allows for ${coder} (${allowed!.join(", ")}); widen coders.${coder}.models in the file.`
    : undefined;
};

/** A coder may be turned off by config set, never on: turning one on hands its credentials to runs. */
const onlyTurnOff: Within = (file, value, { coder }) =>
  value === true && coder !== undefined && file.coders[coder]?.enabled !== true
    ? `turning coder "${coder}" on is file-only: it hands the coder's credentials to agent runs. Set coders.${coder}.enabled: true in ${FILE_HOME}.`
    : undefined;

const SETTABLE: readonly SettableKey[] = [
  operational("max_concurrent", "int", F.max_concurrent, "how many runs at once: spending, not access"),
  // Validated with the whole config: it must name a coder the file enables.
  operational("default_coder", "string", F.default_coder, "which enabled coder a split label runs"),
  fileOnly("dispatch", "string", F.dispatch, "it decides where agent code runs"),
  fileOnly("runner_labels", "list", F.runner_labels, "it decides which machines run agent code"),
  fileOnly("workflow", "string", F.workflow, "it decides which workflow, with which secrets, runs a task"),
  fileOnly("sandbox", "string", F.sandbox, "it decides how an agent is contained on its machine"),
  operational("timeouts.run_minutes", "int", F.run_minutes, "how long a run may take"),
  operational("timeouts.stall_minutes", "int", F.stall_minutes, "how long a run may stay silent"),
  operational("plan_phase", "boolean", boolField, "whether a read-only plan runs first"),
  operational("plan_approval", "boolean", boolField, "whether the plan waits for /fleet approve"),
  operational("retries.max", "int", F.retries_max, "how often a failed run is retried"),
  operational("retries.backoff_seconds", "int", F.backoff_seconds, "how long a retry waits"),
  fileOnly("allowed_roles", "list", F.allowed_roles, "it decides who may drive Fleet"),
  operational("per_user_daily_tasks", "int", F.per_user_daily_tasks, "a guard against floods: lowered only", {
    unsettable: true,
    within: atMostFile((file) => file.per_user_daily_tasks),
  }),
  operational("serialize_overlapping", "boolean", boolField, "whether overlapping tasks wait for each other"),
  fileOnly(
    "auto_label_discovered",
    "boolean",
    boolField,
    "it lets an agent's own follow-ups queue new runs without a person's label",
  ),
  operational("dashboard", "boolean", boolField, "whether the dashboard issue is kept"),
  operational("dashboard_interval_seconds", "int", F.dashboard_interval_seconds, "dashboard edit throttle"),
  ...(["per_task_tokens", "per_task_usd", "daily_usd", "monthly_usd"] as const).flatMap((name) => {
    const field = budgetFields[name];
    const kind: ValueKind = name === "per_task_tokens" ? "int" : "number";
    return [
      operational(`budgets.${name}`, kind, field, "a spending limit: lowered only", {
        unsettable: true,
        within: atMostFile(budgetOf(name)),
      }),
      operational(`budgets.per_coder.<coder>.${name}`, kind, field, "a spending limit: lowered only", {
        unsettable: true,
        within: both(configuredCoder, atMostFile(budgetOf(name))),
      }),
    ];
  }),
  operational("coders.<coder>.model", "string", modelField, "the model, among those the file allows", {
    within: both(configuredCoder, allowedModel),
  }),
  operational(
    "coders.<coder>.models",
    "list",
    { schema: z.array(modelField.schema), form: "a list of model ids" },
    "the models a label may pick: narrowed only",
    { unsettable: true, within: both(configuredCoder, allowedModel) },
  ),
  operational("coders.<coder>.max_concurrent", "int", F.coder_max_concurrent, "a per-coder cap", {
    unsettable: true,
    within: configuredCoder,
  }),
  operational("coders.<coder>.enabled", "boolean", boolField, "turning a coder off; on is file-only", {
    within: both(configuredCoder, onlyTurnOff),
  }),
  fileOnly(
    "coders.<coder>.credentials",
    "list",
    credentialsField,
    "it decides which secrets an agent receives",
  ),
];

/** Every key `config set` accepts; `<coder>` stands for a coder name. */
export const CONFIG_KEYS: readonly string[] = SETTABLE.filter((s) => s.scope === "override").map(
  (s) => s.key,
);

/** Keys that only `.github/fleet.yml` on the default branch may set (`config set` refuses them, saying so). */
export const FILE_ONLY_KEYS: readonly string[] = SETTABLE.filter((s) => s.scope === "file").map((s) => s.key);

export type ConfigAssignment =
  | { ok: true; key: string; value: ConfigValue }
  | { ok: false; key?: string; message: string };

function findSettable(key: string): { spec: SettableKey; coder?: string } | undefined {
  const parts = key.split(".");
  for (const spec of SETTABLE) {
    const pattern = spec.key.split(".");
    if (pattern.length !== parts.length) continue;
    let coder: string | undefined;
    let match = true;
    for (let i = 0; i < pattern.length; i++) {
      if (pattern[i] === "<coder>") {
        if (!CODER_NAME.test(parts[i]!)) match = false;
        else coder = parts[i];
      } else if (pattern[i] !== parts[i]) match = false;
    }
    if (match) return coder === undefined ? { spec } : { spec, coder };
  }
  return undefined;
}

function coerce(
  spec: SettableKey,
  raw: string,
): { ok: true; value: ConfigValue } | { ok: false; message: string } {
  const text = raw.trim();
  const bad = (): { ok: false; message: string } => ({
    ok: false,
    message: `${spec.key.includes("<coder>") ? "this key" : spec.key} must be ${spec.field.form}${
      spec.unsettable ? ' (or "none" to remove the override)' : ""
    }; got "${text}".`,
  });
  if (spec.unsettable && /^(none|null|unset)$/i.test(text)) return { ok: true, value: null };
  let value: ConfigValue;
  switch (spec.kind) {
    case "int":
    case "number": {
      if (!/^-?\d+(\.\d+)?$/.test(text)) return bad();
      value = Number(text);
      break;
    }
    case "boolean": {
      const lower = text.toLowerCase();
      if (["true", "yes", "on"].includes(lower)) value = true;
      else if (["false", "no", "off"].includes(lower)) value = false;
      else return bad();
      break;
    }
    case "list":
      value = text === "" ? [] : text.split(",").map((s) => s.trim());
      break;
    case "string":
      value = text;
      break;
  }
  return spec.field.schema.safeParse(value).success ? { ok: true, value } : bad();
}

const keysHelp = (): string => `Settable keys: ${CONFIG_KEYS.join(", ")}.`;

/** The refusal of a file-only key: which key, why, and where to set it instead. */
const fileOnlyMessage = (key: string, spec: SettableKey): string =>
  `${key} is file-only: ${spec.why}, so Fleet reads it only from ${FILE_HOME}. Change it there with a reviewed commit; config set changes operational settings only.`;

/**
 * Reads one `key=value` (spaces around `=` allowed). `none` removes an optional override (value null).
 * A file-only key is refused whatever its value, with where to set it; limits relative to the file
 * (budgets only lowered, models within the file's list) are `checkOverride`'s.
 */
export function parseConfigAssignment(text: string): ConfigAssignment {
  const eq = text.indexOf("=");
  if (eq < 0) {
    return {
      ok: false,
      message: `"${text.trim()}" is not an assignment: write key=value (e.g. max_concurrent=5). ${keysHelp()}`,
    };
  }
  const key = text.slice(0, eq).trim();
  const rawValue = text.slice(eq + 1);
  if (key === "") return { ok: false, message: `No key before "=". ${keysHelp()}` };
  const found = findSettable(key);
  if (!found) {
    const concrete = CONFIG_KEYS.filter((k) => !k.includes("<coder>"));
    const hint = suggest(key, concrete);
    return {
      ok: false,
      key,
      message: `"${key}" is not a settable key.${hint ? ` Did you mean "${hint}"?` : ""} ${keysHelp()}`,
    };
  }
  if (found.spec.scope === "file") return { ok: false, key, message: fileOnlyMessage(key, found.spec) };
  if (rawValue.trim() === "" && found.spec.kind !== "list") {
    return { ok: false, key, message: `No value for ${key}: it must be ${found.spec.field.form}.` };
  }
  const coerced = coerce(found.spec, rawValue);
  if (!coerced.ok) return { ok: false, key, message: coerced.message.replace("this key", key) };
  return { ok: true, key, value: coerced.value };
}

/**
 * Whether an override stays within what the file allows (a budget lowered, not raised; a model the
 * file lists; a configured coder turned off, not on). A message saying what to do, or undefined.
 * Assumes `parseConfigAssignment` accepted the key and value.
 */
export function checkOverride(file: FleetConfig, key: string, value: ConfigValue): string | undefined {
  const found = findSettable(key);
  if (!found) return `"${key}" is not a settable key. ${keysHelp()}`;
  if (found.spec.scope === "file") return fileOnlyMessage(key, found.spec);
  if (value === null) return undefined;
  return found.spec.within?.(file, value, found.coder === undefined ? { key } : { key, coder: found.coder });
}

function setPath(root: Record<string, unknown>, path: readonly string[], value: ConfigValue): void {
  let node = root;
  for (const k of path.slice(0, -1)) {
    const child = node[k];
    if (child === null || typeof child !== "object" || Array.isArray(child)) node[k] = {};
    node = node[k] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

/** The file config with these (already checked) overrides on top, re-validated as a whole. */
function withOverrides(file: FleetConfig, overrides: ReadonlyArray<{ key: string; value: ConfigValue }>) {
  const draft = structuredClone(file) as unknown as Record<string, unknown>;
  for (const { key, value } of overrides) if (value !== null) setPath(draft, key.split("."), value);
  return parseFleetConfig(draft);
}

/** A stored override's value as `key=value` text reads it. */
const overrideText = (v: unknown): string => (Array.isArray(v) ? v.join(",") : String(v));

/**
 * The config with `config set` overrides applied (key -> raw string value), re-validated as a whole, so
 * an override can never produce a config the file could not, nor go beyond what the file allows. All
 * or nothing: every bad key or value is reported. `none` means "no override" (the file's value).
 */
export function applyOverrides(
  config: FleetConfig,
  overrides: Readonly<Record<string, string>>,
): ParseConfigResult {
  const problems: ConfigProblem[] = [];
  const good: Array<{ key: string; value: ConfigValue }> = [];
  for (const [key, raw] of Object.entries(overrides)) {
    const assignment = parseConfigAssignment(`${key}=${raw}`);
    const problem = assignment.ok ? checkOverride(config, key, assignment.value) : assignment.message;
    if (problem) problems.push({ path: key, message: problem });
    else if (assignment.ok) good.push({ key, value: assignment.value });
  }
  if (problems.length > 0) return { ok: false, problems };
  return withOverrides(config, good);
}

export interface DroppedOverride {
  key: string;
  /** The stored value, as `key=value` text. */
  value: string;
  /** Why it no longer applies (it names the key). */
  message: string;
}

export interface ResolvedOverrides {
  config: FleetConfig;
  /** The stored overrides that apply, by key. */
  applied: Record<string, ConfigValue>;
  /** Stored overrides that no longer apply (the file changed, or they were stored by an older Fleet): each alone. */
  dropped: DroppedOverride[];
}

/**
 * The effective config: the file with the stored overrides that are still valid against it. Never
 * fails: an override that no longer applies (a budget now above the file's, a file-only key an older
 * Fleet stored, a model the file no longer allows) is dropped on its own, with the reason; the others
 * stay. The webhook path, the reconcile and the workers all read the config through this.
 */
export function resolveOverrides(
  file: FleetConfig,
  stored: Readonly<Record<string, unknown>>,
): ResolvedOverrides {
  const dropped: DroppedOverride[] = [];
  const candidates: Array<{ key: string; value: ConfigValue; text: string }> = [];
  for (const [key, v] of Object.entries(stored)) {
    if (v === undefined || v === null) continue;
    const text = overrideText(v);
    const assignment = parseConfigAssignment(`${key}=${text}`);
    const problem = assignment.ok ? checkOverride(file, key, assignment.value) : assignment.message;
    if (problem) dropped.push({ key, value: text, message: problem });
    else if (assignment.ok && assignment.value !== null)
      candidates.push({ key, value: assignment.value, text });
  }
  const all = withOverrides(file, candidates);
  if (all.ok) {
    return {
      config: all.config,
      applied: Object.fromEntries(candidates.map((c) => [c.key, c.value])),
      dropped,
    };
  }
  // Together they break a rule of the whole config (e.g. default_coder names a coder the file now
  // disables): keep them in the order they are stored while the config stays valid, drop the rest.
  const kept: typeof candidates = [];
  let config = file;
  for (const c of candidates) {
    const r = withOverrides(file, [...kept, c]);
    if (r.ok) {
      kept.push(c);
      config = r.config;
    } else {
      dropped.push({
        key: c.key,
        value: c.text,
        message: r.problems.map((p) => `${p.path}: ${p.message}`).join(" "),
      });
    }
  }
  return { config, applied: Object.fromEntries(kept.map((c) => [c.key, c.value])), dropped };
}

export type OverrideUpdate =
  | {
      ok: true;
      config: FleetConfig;
      /** The overrides to store: the valid stored ones with these assignments applied (`none` removes one). */
      overrides: Record<string, ConfigValue>;
      /** Stored overrides that no longer applied and are not kept. */
      dropped: DroppedOverride[];
    }
  | { ok: false; problems: ConfigProblem[] };

/**
 * `config set`: the assignments checked against the file and, with the stored overrides that still
 * apply, against the rules of the whole config. All or nothing; every problem is reported by key.
 */
export function updateOverrides(
  file: FleetConfig,
  stored: Readonly<Record<string, unknown>>,
  assignments: ReadonlyArray<{ key: string; value: ConfigValue }>,
): OverrideUpdate {
  const current = resolveOverrides(file, stored);
  const problems: ConfigProblem[] = [];
  const next: Record<string, ConfigValue> = { ...current.applied };
  for (const a of assignments) {
    const problem = checkOverride(file, a.key, a.value);
    if (problem) problems.push({ path: a.key, message: problem });
    else if (a.value === null) delete next[a.key];
    else next[a.key] = a.value;
  }
  if (problems.length > 0) return { ok: false, problems };
  const whole = withOverrides(
    file,
    Object.entries(next).map(([key, value]) => ({ key, value })),
  );
  if (!whole.ok) return { ok: false, problems: whole.problems };
  return { ok: true, config: whole.config, overrides: next, dropped: current.dropped };
}
