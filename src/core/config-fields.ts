import { z } from "zod";
import { CODER_OPTIONS_FORM, CODER_OPTIONS_SCHEMA, type CoderOptions } from "./coder-options.ts";
import { NETWORK_FORM, NETWORK_SCHEMA, type NetworkSetting } from "./network-policy.ts";

// The keys of `.github/fleet.yml`, each once: its value's schema and the words for its errors, its
// default, and whether `config set` may change it (and within what), with the reason. The file's
// schema, the FleetConfig type, the valid keys at each level, the settable and file-only keys are all
// read from this table.

/** Where the repository's configuration lives. */
export const FLEET_CONFIG_PATH = ".github/fleet.yml";
/** Where a file-only key is set, as the refusals say it. */
export const FILE_HOME = `${FLEET_CONFIG_PATH} on the default branch`;

export const REPO_ROLES = ["admin", "maintain", "write", "triage", "read"] as const;
export type RepoRole = (typeof REPO_ROLES)[number];
export const DISPATCH_MODES = ["actions", "local"] as const;
export type DispatchMode = (typeof DISPATCH_MODES)[number];
/** How an agent run is contained: `bubblewrap` (Linux namespaces, the default) or `none` (chosen explicitly). */
export const SANDBOX_MODES = ["bubblewrap", "none"] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];
/** What an agent's HOME holds: `isolated` (empty, the default) or `inherit` (the user's logins and context files, read-only). */
export const HOME_MODES = ["isolated", "inherit"] as const;
export type HomeMode = (typeof HOME_MODES)[number];

export const CODER_NAME = /^[a-z][a-z0-9_-]*$/;
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$/;
// Credentials are named (an env variable or an Actions secret), never written into the file.
const CREDENTIAL_NAME = /^[A-Z_][A-Z0-9_]*$/;
const WORKFLOW_FILE = /^[A-Za-z0-9._-]+\.ya?ml$/;

// ---- Value types: a schema, the words after "must be", and how `config set` reads one from text ----

/** How `config set` reads a value written as text. */
export type ValueKind = "number" | "boolean" | "string" | "list";

export interface ValueType<T> {
  schema: z.ZodType<T>;
  /** What a valid value is, after "must be". */
  form: string;
  kind: ValueKind;
  /** For a list: what one item must be, when that says more than `form`. */
  itemForm?: string;
}

const int = (min: number, max: number): ValueType<number> => ({
  schema: z.number().int().min(min).max(max),
  form: `a whole number from ${min} to ${max}`,
  kind: "number",
});
const usd: ValueType<number> = {
  schema: z.number().positive().max(1_000_000),
  form: "an amount in US dollars above 0",
  kind: "number",
};
const tokens: ValueType<number> = {
  schema: z.number().int().positive(),
  form: "a whole number of tokens above 0",
  kind: "number",
};
const bool: ValueType<boolean> = { schema: z.boolean(), form: "true or false", kind: "boolean" };
const oneOf = <T extends string>(values: readonly [T, ...T[]]): ValueType<T> => ({
  schema: z.enum(values),
  form: `one of: ${values.join(", ")}`,
  kind: "string",
});
const modelId = z
  .string()
  .regex(MODEL_NAME)
  .refine((s) => !s.includes(".."));
const MODEL_FORM = 'a model id (letters, digits, ".", "_", "-", "/"; at most 64 characters)';
const model: ValueType<string> = { schema: modelId, form: MODEL_FORM, kind: "string" };
const models: ValueType<string[]> = {
  schema: z.array(modelId).min(1),
  form: "a non-empty list of model ids",
  kind: "list",
  itemForm: MODEL_FORM,
};
const credentialNames: ValueType<string[]> = {
  schema: z.array(z.string().regex(CREDENTIAL_NAME)),
  form: "a list of secret or environment variable NAMES (e.g. ANTHROPIC_API_KEY), never their values",
  kind: "list",
};

const setupCommands: ValueType<string[]> = {
  schema: z.array(z.string().trim().min(1).max(4000)).max(50),
  form: "a list of shell commands (at most 50), run in order in the task's worktree before the agent",
  kind: "list",
};
/** A folder inside the worktree: relative, no `..`, no `.git`. */
const WORKTREE_FOLDER = /^(?!\/)(?!.*(^|\/)\.\.?(\/|$))(?!\.git(\/|$))[^\0]{1,200}$/;
const worktreeFolders: ValueType<string[]> = {
  schema: z.array(z.string().regex(WORKTREE_FOLDER)).max(20),
  form: "a list of folders inside the repository (relative paths, no .. and not .git), at most 20",
  kind: "list",
};
const coderOptions: ValueType<CoderOptions> = {
  schema: CODER_OPTIONS_SCHEMA,
  form: CODER_OPTIONS_FORM,
  kind: "string",
};
const network: ValueType<NetworkSetting> = { schema: NETWORK_SCHEMA, form: NETWORK_FORM, kind: "string" };
const megabytes: ValueType<number> = {
  schema: z.number().int().min(64).max(16_777_216),
  form: "a whole number of megabytes from 64",
  kind: "number",
};
const cpus: ValueType<number> = {
  schema: z.number().min(0.1).max(1024),
  form: "a number of cores from 0.1 (e.g. 2 or 0.5)",
  kind: "number",
};

// ---- What `config set` may do with a key ----
//
// An override is stored in the repository state by anyone who may drive Fleet, and wins over the file.
// So it may change how Fleet schedules, waits and spends (within what the file allows), never who may
// drive Fleet, which secrets an agent receives, where its code runs or how it is contained: those come
// only from .github/fleet.yml on the default branch, a reviewed commit like any other.

export type ConfigValue = number | boolean | string | string[] | null;

/** What the checks of `config set` read of the file config (a FleetConfig is one). */
export interface FileView {
  coders: Readonly<Record<string, { models?: readonly string[]; enabled: boolean }>>;
}

/** A problem with an override measured against the file config, or undefined when it is within it. */
export type Within = (
  file: FileView,
  value: ConfigValue,
  at: { key: string; coder?: string },
) => string | undefined;

export type SetRule =
  /** `config set` may change it, within `within` when given. */
  | { scope: "override"; why: string; within?: Within }
  /** Only the file may set it: `why` is said in the refusal. */
  | { scope: "file"; why: string };

const operational = (why: string, within?: Within): SetRule =>
  within ? { scope: "override", why, within } : { scope: "override", why };
/** Operational, but only in the direction that gives less than the file: the check says how. */
const tighterOnly = (why: string, within: Within): SetRule => ({ scope: "override", why, within });
const fileOnly = (why: string): SetRule => ({ scope: "file", why });

/** The value at a key path of a parsed config or file (undefined where there is none). */
export function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let node = root;
  for (const k of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<PropertyKey, unknown>)[k];
  }
  return node;
}

/** Limits that guard spending may only be tightened: at most the file's value when the file sets one. */
const atMostFile: Within = (file, value, { key }) => {
  const limit = valueAt(file, key.split("."));
  if (typeof limit !== "number" || typeof value !== "number" || value <= limit) return undefined;
  return `${key} can only be lowered with config set: ${FILE_HOME} sets ${limit}, and ${value} is above it. Raise it in the file.`;
};

/** A model the file allows for the coder (any model when the file lists none). */
const allowedModel: Within = (file, value, { coder }) => {
  const allowed = coder === undefined ? undefined : file.coders[coder]?.models;
  const wanted = Array.isArray(value) ? value : [String(value)];
  const outside = allowed ? wanted.filter((m) => !allowed.includes(m)) : [];
  return outside.length
    ? `${outside.join(", ")} is not a model ${FILE_HOME} allows for ${coder} (${allowed!.join(", ")}); widen coders.${coder}.models in the file.`
    : undefined;
};

/**
 * A limit where 0 means off may be lowered with config set, never turned off or raised past the
 * file's (when the file sets one).
 */
const lowerNotOff: Within = (file, value, { key }) => {
  const limit = valueAt(file, key.split("."));
  if (typeof limit !== "number" || limit === 0 || typeof value !== "number") return undefined;
  if (value === 0)
    return `${key} can only be lowered with config set: ${FILE_HOME} sets ${limit}, and 0 would turn it off. Remove it in the file.`;
  return atMostFile(file, value, { key });
};

/** A coder may be turned off by config set, never on: turning one on hands its credentials to runs. */
const onlyTurnOff: Within = (file, value, { coder }) =>
  value === true && coder !== undefined && file.coders[coder]?.enabled !== true
    ? `turning coder "${coder}" on is file-only: it hands the coder's credentials to agent runs. Set coders.${coder}.enabled: true in ${FILE_HOME}.`
    : undefined;

// ---- The table ----

interface LeafOf<T> {
  value: ValueType<T>;
  set: SetRule;
}
/** The file may leave it out: this value applies. */
export interface WithDefault<T> extends LeafOf<T> {
  has: "default";
  default: T;
}
/** Under `coders.<coder>`: left out, the coder's built-in value applies (src/core/coders.ts). */
export interface FromCoder<T> extends LeafOf<T> {
  has: "built-in";
}
/** Left out, there is none (a limit not set). `config set <key>=none` removes an override of it. */
export interface Optional<T> extends LeafOf<T> {
  has: "none";
}
export type Leaf<T = unknown> = WithDefault<T> | FromCoder<T> | Optional<T>;
/** Keys nested under one key (`timeouts:`). */
export interface Group<F extends Fields = Fields> {
  group: F;
}
/** The same keys for each coder, under its name (`coders.<coder>`, `budgets.per_coder.<coder>`). */
export interface PerCoder<F extends Fields = Fields> {
  perCoder: F;
}
export type FieldNode = Leaf | Group | PerCoder;
export type Fields = { readonly [key: string]: FieldNode };

const withDefault = <T>(value: ValueType<T>, dflt: NoInfer<T>, set: SetRule): WithDefault<T> => ({
  has: "default",
  value,
  default: dflt,
  set,
});
const fromCoder = <T>(value: ValueType<T>, set: SetRule): FromCoder<T> => ({ has: "built-in", value, set });
const optional = <T>(value: ValueType<T>, set: SetRule): Optional<T> => ({ has: "none", value, set });

const spendingLimit = <T>(value: ValueType<T>) =>
  optional(value, tighterOnly("a spending limit: lowered only", atMostFile));

const BUDGET_FIELDS = {
  per_task_tokens: spendingLimit(tokens),
  per_task_usd: spendingLimit(usd),
  daily_usd: spendingLimit(usd),
  monthly_usd: spendingLimit(usd),
};

/** A guard that is on by default: 0 turns it off in the file; config set may only lower it. */
const guardOnByDefault = (value: ValueType<number>, dflt: number, why: string) =>
  withDefault(value, dflt, tighterOnly(`${why}: lowered only`, lowerNotOff));
const tokensOrOff: ValueType<number> = {
  schema: z.number().int().min(0),
  form: "a whole number of tokens (0: no ceiling)",
  kind: "number",
};
const usdOrOff: ValueType<number> = {
  schema: z.number().min(0).max(1_000_000),
  form: "an amount in US dollars (0: no ceiling)",
  kind: "number",
};

/**
 * The repository's per-task ceilings, on by default and held at the model gateway: the request that
 * would pass one is refused. 10M tokens (cache reads count: a long Claude session reads 5-8M) and $25.
 */
const REPO_BUDGET_FIELDS = {
  ...BUDGET_FIELDS,
  per_task_tokens: guardOnByDefault(tokensOrOff, 10_000_000, "a per-task ceiling"),
  per_task_usd: guardOnByDefault(usdOrOff, 25, "a per-task ceiling"),
};

const CODER_FIELDS = {
  /** The model used when a label names none. */
  model: fromCoder(model, operational("the model, among those the file allows", allowedModel)),
  /** When set, the only models a label may pick. */
  models: optional(models, tighterOnly("the models a label may pick: narrowed only", allowedModel)),
  /** Per-coder cap; the global max_concurrent still applies. */
  max_concurrent: optional(int(1, 100), operational("a per-coder cap")),
  /** Names (never values) of the secrets or environment variables the coder may use, in order of preference. */
  credentials: fromCoder(credentialNames, fileOnly("it decides which secrets an agent receives")),
  enabled: fromCoder(bool, tighterOnly("turning a coder off; on is file-only", onlyTurnOff)),
  /** Left out: `isolated`, an empty HOME of the task's own. */
  home: optional(
    oneOf(HOME_MODES),
    fileOnly(
      "`inherit` widens what the agent reads to the worker's user's logins and context files (~/.claude, ~/.codex, ...), and an agent may publish whatever it reads",
    ),
  ),
  /** The CLI's own options Fleet knows how to pass (src/core/coder-options.ts), checked per coder. */
  options: optional(
    coderOptions,
    fileOnly("it decides which tools, instructions and MCP servers the agent runs with"),
  ),
};

/**
 * Every key of `.github/fleet.yml`, in the order the file's "valid keys" list them (`config set`
 * lists the repository-wide keys first, then the per-coder ones).
 */
export const CONFIG_FIELDS = {
  /** Merged over the built-in coders key by key. */
  coders: { perCoder: CODER_FIELDS },
  max_concurrent: withDefault(int(1, 100), 3, operational("how many runs at once: spending, not access")),
  // Validated with the whole config: it must name a coder the file enables.
  default_coder: withDefault(
    { schema: z.string().regex(CODER_NAME), form: "the name of a configured coder", kind: "string" },
    "claude",
    operational("which enabled coder a split label runs"),
  ),
  /** `actions`: workflow_dispatch onto self-hosted runners; `local`: a worker process claims tasks. */
  dispatch: withDefault(oneOf(DISPATCH_MODES), "actions", fileOnly("it decides where agent code runs")),
  runner_labels: withDefault(
    {
      schema: z.array(z.string().min(1).max(100)).min(1),
      form: "a non-empty list of runner labels (e.g. self-hosted, fleet)",
      kind: "list",
    },
    ["self-hosted", "fleet"],
    fileOnly("it decides which machines run agent code"),
  ),
  timeouts: {
    group: {
      run_minutes: withDefault(int(1, 1440), 60, operational("how long a run may take")),
      stall_minutes: withDefault(int(1, 1440), 10, operational("how long a run may stay silent")),
    },
  },
  /** Run a read-only plan phase before the real run. */
  plan_phase: withDefault(bool, true, operational("whether a read-only plan runs first")),
  /** Wait for `/fleet approve` after the plan. */
  plan_approval: withDefault(bool, false, operational("whether the plan waits for /fleet approve")),
  retries: {
    group: {
      max: withDefault(int(0, 10), 2, operational("how often a failed run is retried")),
      backoff_seconds: withDefault(int(0, 86_400), 60, operational("how long a retry waits")),
    },
  },
  budgets: { group: { ...REPO_BUDGET_FIELDS, per_coder: { perCoder: BUDGET_FIELDS } } },
  /** Stop agents that loop, at the model gateway (0 turns a check off). */
  runaway: {
    group: {
      /** The same tool call with the same input this many times, the worktree unchanged meanwhile. */
      repeated_tool_calls: guardOnByDefault(int(0, 1000), 5, "a guard against looping agents"),
      /** This many turns with tool calls in a row that change nothing in the worktree (work phase). */
      idle_turns: guardOnByDefault(int(0, 10_000), 40, "a guard against agents that get nowhere"),
    },
  },
  /** New runs wait for another credential when one of a credential's rate-limit windows is this full (percent). */
  credential_near_limit_pct: withDefault(
    int(1, 100),
    90,
    operational("when new runs wait for a credential's window to reset"),
  ),
  allowed_roles: withDefault(
    {
      schema: z.array(z.enum(REPO_ROLES)).min(1),
      form: `a non-empty list of roles from: ${REPO_ROLES.join(", ")}`,
      kind: "list",
    },
    ["admin", "maintain", "write"],
    fileOnly("it decides who may drive Fleet"),
  ),
  per_user_daily_tasks: optional(
    int(1, 10_000),
    tighterOnly("a guard against floods: lowered only", atMostFile),
  ),
  serialize_overlapping: withDefault(
    bool,
    false,
    operational("whether overlapping tasks wait for each other"),
  ),
  /** Pull request events that queue an agent review of a person's PR (`opened`, `ready_for_review`); none by default. */
  review_on: withDefault(
    {
      schema: z.array(z.enum(["opened", "ready_for_review"])).max(2),
      form: "a list of pull request events from: opened, ready_for_review",
      kind: "list",
    },
    [],
    fileOnly("it queues agent runs, which spend, on pull requests nobody asked Fleet about"),
  ),
  /** When a Fleet PR opens, this coder reviews it (read-only, one GitHub review) before people do. */
  cross_review: optional(
    { schema: z.string().regex(CODER_NAME), form: "the name of a configured coder", kind: "string" },
    operational("whether another coder reviews Fleet's pull requests"),
  ),
  /** With `review_on`: only a PR that changes a file matching one of these globs is reviewed (none: any file). */
  review_paths: withDefault(
    {
      schema: z.array(z.string().trim().min(1).max(200)).max(50),
      form: "a list of path globs (e.g. src/**, *.ts), at most 50",
      kind: "list",
    },
    [],
    fileOnly("it decides which pull requests get agent runs without a person asking"),
  ),
  auto_label_discovered: withDefault(
    bool,
    false,
    fileOnly("it lets an agent's own follow-ups queue new runs without a person's label"),
  ),
  /** Follow-ups of one run filed as issues (0: none); the rest are listed in its pull request only. */
  max_follow_ups: withDefault(
    int(0, 100),
    5,
    tighterOnly("a guard against floods of issues: lowered only", atMostFile),
  ),
  workflow: withDefault(
    {
      schema: z.string().regex(WORKFLOW_FILE),
      form: "a workflow file name ending in .yml or .yaml",
      kind: "string",
    },
    "fleet-task.yml",
    fileOnly("it decides which workflow, with which secrets, runs a task"),
  ),
  /** Keep one pinned dashboard issue per repository current (opt-in: it creates an issue). */
  dashboard: withDefault(bool, false, operational("whether the dashboard issue is kept")),
  /** At most one dashboard edit per this many seconds (0: every change). */
  dashboard_interval_seconds: withDefault(int(0, 86_400), 60, operational("dashboard edit throttle")),
  /** Stop a run whose last model turn read more than this share of the model's context window (0: off). */
  max_context_pct: optional(
    int(0, 100),
    tighterOnly("a guard against runs that fill their context: lowered only", lowerNotOff),
  ),
  /** Shell commands run in the task's worktree, in the sandbox, before the agent (e.g. `npm ci`). */
  setup: withDefault(
    setupCommands,
    [],
    fileOnly("it runs commands on the worker's machine before every agent run"),
  ),
  /** Folders setup makes that are kept between tasks, keyed by the setup commands and the lockfiles. */
  setup_cache: withDefault(
    worktreeFolders,
    [],
    fileOnly("what it keeps is handed to every later task's agent"),
  ),
  /** What an agent may reach: the egress proxy and its allowlist (default), `none`, or `host`. */
  network: withDefault(network, "proxy", fileOnly("it decides what an agent can reach on the network")),
  /** The setup commands' network, when it is not the agent's (e.g. `host`). */
  setup_network: optional(network, fileOnly("it decides what setup commands can reach on the network")),
  /** Per run (setup and each agent phase), enforced with cgroups where the worker has them. */
  limits: {
    group: {
      memory_mb: withDefault(megabytes, 8192, tighterOnly("a resource limit: lowered only", atMostFile)),
      pids: withDefault(int(16, 4_194_304), 1024, tighterOnly("a resource limit: lowered only", atMostFile)),
      /** Left out: every core. */
      cpus: optional(cpus, tighterOnly("a resource limit: lowered only", atMostFile)),
    },
  },
  /**
   * Whether an agent's change may touch `.github/workflows/` (the app must also be granted the
   * `workflows` permission); otherwise those files are held back from the push and shown in the PR.
   */
  allow_workflow_changes: withDefault(
    bool,
    false,
    fileOnly("workflows run with the repository's secrets: a person should write them, or allow it here"),
  ),
  /** The task's pull request opens as a draft when its branch is pushed and is marked ready when the run succeeds. */
  draft_pr: withDefault(
    bool,
    false,
    operational("whether a task's pull request opens as a draft until its run succeeds"),
  ),
  /** The agent's `ask_human` tool: a question ends the run `waiting` until a person answers. */
  ask_human: {
    group: {
      enabled: withDefault(
        bool,
        true,
        operational("whether the agent may stop to ask a person a question (its ask_human tool)"),
      ),
      expire_after_hours: withDefault(
        int(1, 24 * 30),
        72,
        operational("how long an agent's question waits for an answer before the task fails"),
      ),
    },
  },
  /** How agent runs are contained; `none` must be chosen in the file and is shown on every tracking comment. */
  sandbox: withDefault(
    oneOf(SANDBOX_MODES),
    "bubblewrap",
    fileOnly("it decides how an agent is contained on its machine"),
  ),
} satisfies Fields;

// ---- The FleetConfig type, read from the table ----

type ValueOf<N> =
  N extends LeafOf<infer T>
    ? T
    : N extends Group<infer F>
      ? Shape<F>
      : N extends PerCoder<infer F>
        ? Record<string, Shape<F>>
        : never;
type Flat<T> = { [K in keyof T]: T[K] } & {};
/** A leaf without a value when left out is optional; everything else is always there. */
type Shape<F> = Flat<
  { -readonly [K in keyof F as F[K] extends { has: "none" } ? never : K]: ValueOf<F[K]> } & {
    -readonly [K in keyof F as F[K] extends { has: "none" } ? K : never]?: ValueOf<F[K]>;
  }
>;

/** A repository's config, defaults filled in. */
export type FleetConfig = Shape<typeof CONFIG_FIELDS>;
export type CoderConfig = FleetConfig["coders"][string];
export type BudgetLimits = Omit<FleetConfig["budgets"], "per_coder">;

// ---- The file's schema, read from the table ----

function schemaOf(node: FieldNode): z.ZodType {
  if ("value" in node)
    return node.has === "default" ? node.value.schema.default(node.default) : node.value.schema.optional();
  if ("group" in node) return objectOf(node.group).prefault({});
  return z.record(z.string(), objectOf(node.perCoder)).default({});
}

const objectOf = (fields: Fields) =>
  z.strictObject(Object.fromEntries(Object.entries(fields).map(([key, node]) => [key, schemaOf(node)])));

/** `.github/fleet.yml` as zod checks it: unknown keys refused at every level, defaults filled in. */
export const FILE_SCHEMA = objectOf(CONFIG_FIELDS);

/** What FILE_SCHEMA gives: the config before the coders are merged over the built-ins. */
export type FileInput = Omit<FleetConfig, "coders"> & { coders: Record<string, Partial<CoderConfig>> };

// ---- Walking the table ----

const ROOT: FieldNode = { group: CONFIG_FIELDS };

/** The table's node at `path` (coder names stand for themselves) and how many segments were left past a leaf. */
function nodeAt(path: readonly string[]): { node: FieldNode; rest: number } | undefined {
  let node = ROOT;
  for (let i = 0; i < path.length; i++) {
    if ("value" in node) return { node, rest: path.length - i };
    if ("perCoder" in node) {
      node = { group: node.perCoder };
      continue;
    }
    const key = path[i]!;
    if (!Object.hasOwn(node.group, key)) return undefined;
    node = node.group[key]!;
  }
  return { node, rest: 0 };
}

/** The keys allowed under `path` (empty where the table has no mapping of named keys). */
export function validKeysAt(path: readonly string[]): string[] {
  const at = nodeAt(path);
  if (at && "group" in at.node) return Object.keys(at.node.group);
  // A leaf that is a mapping of its own (coders.<coder>.options) names its keys too.
  const schema = at && "value" in at.node && at.rest === 0 ? at.node.value.schema : undefined;
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

/** What the value at `path` must be (an item's words for a path into a list), or undefined off the table. */
export function formAt(path: readonly string[]): string | undefined {
  const at = nodeAt(path);
  if (!at || !("value" in at.node)) return undefined;
  return at.rest > 0 ? (at.node.value.itemForm ?? at.node.value.form) : at.node.value.form;
}

/** A key `config set` knows: `pattern` is the key with `<coder>` standing for a coder name. */
export interface SettableKey {
  pattern: string;
  leaf: Leaf;
  /** Whether `none` removes the override (the file's value applies again): the key has no default. */
  unsettable: boolean;
}

function settableKeys(fields: Fields, prefix: string): SettableKey[] {
  return Object.entries(fields).flatMap(([key, node]): SettableKey[] => {
    const pattern = `${prefix}${key}`;
    if ("value" in node) return [{ pattern, leaf: node, unsettable: node.has === "none" }];
    if ("group" in node) return settableKeys(node.group, `${pattern}.`);
    return settableKeys(node.perCoder, `${pattern}.<coder>.`);
  });
}

const perCoderLast = (keys: SettableKey[]): SettableKey[] => [
  ...keys.filter((k) => !k.pattern.includes("<coder>")),
  ...keys.filter((k) => k.pattern.includes("<coder>")),
];

/** Every key of the table as `config set` sees it: the repository-wide ones first, then the per-coder ones. */
export const SETTABLE_KEYS: readonly SettableKey[] = perCoderLast(settableKeys(CONFIG_FIELDS, ""));

/** The settable key `key` names (a coder name in place of `<coder>`), with that coder; undefined for none. */
export function settableAt(key: string): { spec: SettableKey; coder?: string } | undefined {
  const parts = key.split(".");
  const pattern: string[] = [];
  let coder: string | undefined;
  let node = ROOT;
  for (const part of parts) {
    if ("value" in node) return undefined;
    if ("perCoder" in node) {
      if (!CODER_NAME.test(part)) return undefined;
      coder = part;
      pattern.push("<coder>");
      node = { group: node.perCoder };
      continue;
    }
    if (!Object.hasOwn(node.group, part)) return undefined;
    pattern.push(part);
    node = node.group[part]!;
  }
  const spec = SETTABLE_KEYS.find((s) => s.pattern === pattern.join("."));
  if (!spec || !("value" in node)) return undefined;
  return coder === undefined ? { spec } : { spec, coder };
}
