import {
  type ConfigValue,
  FILE_HOME,
  type FleetConfig,
  SETTABLE_KEYS,
  type SettableKey,
  settableAt,
  type Within,
} from "./config-fields.ts";
import { type ConfigProblem, type ParseConfigResult, parseFleetConfig, suggest } from "./config-file.ts";

// ---- `/fleet config set k=v` and `fleet config set k=v` ----
//
// Which keys an override may change, and within what, is the field table's (config-fields.ts): each
// key says whether it is operational or file-only and why. Here: reading `key=value`, checking it
// against the file, and applying stored overrides.

/** Every key `config set` accepts; `<coder>` stands for a coder name. */
export const CONFIG_KEYS: readonly string[] = SETTABLE_KEYS.filter(
  (s) => s.leaf.set.scope === "override",
).map((s) => s.pattern);

/** Keys that only `.github/fleet.yml` on the default branch may set (`config set` refuses them, saying so). */
export const FILE_ONLY_KEYS: readonly string[] = SETTABLE_KEYS.filter((s) => s.leaf.set.scope === "file").map(
  (s) => s.pattern,
);

export type ConfigAssignment =
  | { ok: true; key: string; value: ConfigValue }
  | { ok: false; key?: string; message: string };

function coerce(
  spec: SettableKey,
  key: string,
  raw: string,
): { ok: true; value: ConfigValue } | { ok: false; message: string } {
  const text = raw.trim();
  const { form, kind, schema } = spec.leaf.value;
  const bad = (): { ok: false; message: string } => ({
    ok: false,
    message: `${key} must be ${form}${spec.unsettable ? ' (or "none" to remove the override)' : ""}; got "${text}".`,
  });
  if (spec.unsettable && /^(none|null|unset)$/i.test(text)) return { ok: true, value: null };
  let value: ConfigValue;
  switch (kind) {
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
  return schema.safeParse(value).success ? { ok: true, value } : bad();
}

const keysHelp = (): string => `Settable keys: ${CONFIG_KEYS.join(", ")}.`;

/** The refusal of a file-only key: which key, why, and where to set it instead. */
const fileOnlyMessage = (key: string, spec: SettableKey): string =>
  `${key} is file-only: ${spec.leaf.set.why}, so Fleet reads it only from ${FILE_HOME}. Change it there with a reviewed commit; config set changes operational settings only.`;

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
  const found = settableAt(key);
  if (!found) {
    const concrete = CONFIG_KEYS.filter((k) => !k.includes("<coder>"));
    const hint = suggest(key, concrete);
    return {
      ok: false,
      key,
      message: `"${key}" is not a settable key.${hint ? ` Did you mean "${hint}"?` : ""} ${keysHelp()}`,
    };
  }
  const { spec } = found;
  if (spec.leaf.set.scope === "file") return { ok: false, key, message: fileOnlyMessage(key, spec) };
  if (rawValue.trim() === "" && spec.leaf.value.kind !== "list") {
    return { ok: false, key, message: `No value for ${key}: it must be ${spec.leaf.value.form}.` };
  }
  const coerced = coerce(spec, key, rawValue);
  if (!coerced.ok) return { ok: false, key, message: coerced.message };
  return { ok: true, key, value: coerced.value };
}

/**
 * Several `key=value` texts, all or nothing: the assignments, or every bad one's message (so one
 * answer names them all).
 */
export function parseConfigAssignments(
  texts: readonly string[],
): { ok: true; assignments: Array<{ key: string; value: ConfigValue }> } | { ok: false; problems: string[] } {
  const assignments: Array<{ key: string; value: ConfigValue }> = [];
  const problems: string[] = [];
  for (const text of texts) {
    const a = parseConfigAssignment(text);
    if (a.ok) assignments.push({ key: a.key, value: a.value });
    else problems.push(a.message);
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, assignments };
}

/** The coder must be one the file (or the built-ins) configures: adding a coder is file-only. */
const configuredCoder: Within = (file, _value, { coder }) =>
  coder !== undefined && !file.coders[coder]
    ? `"${coder}" is not a coder configured in ${FILE_HOME} (or built in); adding a coder is file-only. Configured coders: ${Object.keys(file.coders).join(", ")}.`
    : undefined;

/**
 * Whether an override stays within what the file allows (a budget lowered, not raised; a model the
 * file lists; a configured coder turned off, not on). A message saying what to do, or undefined.
 * Assumes `parseConfigAssignment` accepted the key and value.
 */
export function checkOverride(file: FleetConfig, key: string, value: ConfigValue): string | undefined {
  const found = settableAt(key);
  if (!found) return `"${key}" is not a settable key. ${keysHelp()}`;
  const rule = found.spec.leaf.set;
  if (rule.scope === "file") return fileOnlyMessage(key, found.spec);
  if (value === null) return undefined;
  const at = found.coder === undefined ? { key } : { key, coder: found.coder };
  return configuredCoder(file, value, at) ?? rule.within?.(file, value, at);
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

/** A stored (or given) override read and checked against the file: its value, or why it does not apply. */
function checkedOverride(
  file: FleetConfig,
  key: string,
  text: string,
): { ok: true; value: ConfigValue } | { ok: false; message: string } {
  const assignment = parseConfigAssignment(`${key}=${text}`);
  if (!assignment.ok) return assignment;
  const problem = checkOverride(file, key, assignment.value);
  return problem ? { ok: false, message: problem } : { ok: true, value: assignment.value };
}

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
    const checked = checkedOverride(config, key, raw);
    if (checked.ok) good.push({ key, value: checked.value });
    else problems.push({ path: key, message: checked.message });
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
    const checked = checkedOverride(file, key, text);
    if (!checked.ok) dropped.push({ key, value: text, message: checked.message });
    else if (checked.value !== null) candidates.push({ key, value: checked.value, text });
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

/** Assignments as `config set` echoes them (`key=value`, `key=none`), for messages and commit lines. */
export const assignmentsText = (assignments: ReadonlyArray<{ key: string; value: ConfigValue }>): string =>
  assignments.map((a) => `${a.key}=${a.value === null ? "none" : String(a.value)}`).join(" ");
