import { DEFAULT_PRIORITY, type Priority } from "./task.ts";

export const LABEL_PREFIX = "fleet:";

export type ParsedLabel =
  | { kind: "none" }
  | { kind: "coder"; coder: string; model?: string }
  | { kind: "priority"; priority: Priority }
  | { kind: "split"; coder?: string }
  | { kind: "rebase" }
  | { kind: "error"; label: string; message: string };

export const LABEL_GRAMMAR_HELP = [
  "Fleet labels:",
  "- `fleet:<coder>`: run the issue with that coder and its default model (e.g. `fleet:claude`)",
  "- `fleet:<coder>:<model>`: pick the model too (e.g. `fleet:codex:gpt-5-codex`); two coder labels start two runs (A/B)",
  "- `fleet:p0` .. `fleet:p4`: priority, 0 most urgent, 2 when absent",
  "- `fleet:split`, `fleet:split:<coder>`: split the issue into sub-tasks",
  "- `fleet:rebase`: rebase the task's pull request",
  "Coder names are lowercase; models use letters, digits, `.`, `_`, `-` and `/`.",
].join("\n");

// Coder names are what `fleet:<coder>` can spell: lowercase, start with a letter.
const CODER_NAME = /^[a-z][a-z0-9_-]*$/;
// Model ids as providers spell them: "gpt-5-codex", "gemini-2.5-pro", "claude-opus-4-1", "openrouter/x".
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._/-]*$/;
const MAX_MODEL_LENGTH = 64;

const coderList = (knownCoders: readonly string[]): string =>
  knownCoders.length > 0 ? knownCoders.join(", ") : "(none configured)";

const useForms = (knownCoders: readonly string[]): string =>
  `Use fleet:<coder> or fleet:<coder>:<model> with coder one of: ${coderList(knownCoders)}.`;

const SPLIT_FORMS = (knownCoders: readonly string[]): string =>
  `Use fleet:split or fleet:split:<coder> with coder one of: ${coderList(knownCoders)}.`;

const error = (label: string, message: string): ParsedLabel => ({ kind: "error", label, message });

function checkModel(label: string, coder: string, model: string): string | undefined {
  if (model === "") {
    return `Label ${label} has no model after "${coder}:". Use fleet:${coder} for the default model or fleet:${coder}:<model>.`;
  }
  if (model.length > MAX_MODEL_LENGTH) {
    return `Model "${model.slice(0, 20)}..." in label ${label} is longer than ${MAX_MODEL_LENGTH} characters.`;
  }
  if (!MODEL_NAME.test(model) || model.includes("..")) {
    return `Model "${model}" in label ${label} has characters a model id cannot contain. Models use letters, digits, ".", "_", "-" and "/" (e.g. fleet:${coder}:gpt-5-codex).`;
  }
  return undefined;
}

function checkCoder(
  label: string,
  coderAt: number,
  coder: string,
  forms: string,
  knownCoders: readonly string[],
): string | undefined {
  if (knownCoders.includes(coder)) return undefined;
  const lower = coder.toLowerCase();
  if (lower !== coder && knownCoders.includes(lower)) {
    const fixed = label.slice(0, coderAt) + lower + label.slice(coderAt + coder.length);
    return `Coder names are lowercase: use ${fixed} instead of ${label}. ${forms}`;
  }
  if (coder === "") return `Label ${label} names no coder. ${forms}`;
  if (!CODER_NAME.test(coder)) {
    return `"${coder}" in label ${label} is not a coder name (lowercase letters, digits, "-" and "_"). ${forms}`;
  }
  return `Unknown coder "${coder}" in label ${label}. ${forms}`;
}

/**
 * Reads one label. Anything not starting with `fleet:` (in any case: GitHub label names are
 * case-insensitive) is `none`; a `fleet:` label that does not follow the grammar is an `error`
 * whose message says what is wrong and which forms are valid.
 */
export function parseFleetLabel(name: string, knownCoders: readonly string[]): ParsedLabel {
  if (name.slice(0, LABEL_PREFIX.length).toLowerCase() !== LABEL_PREFIX) return { kind: "none" };
  const rest = name.slice(LABEL_PREFIX.length);
  if (/\s/.test(name)) {
    return error(
      name,
      `Label "${name}" contains whitespace; Fleet labels have none. ${useForms(knownCoders)}`,
    );
  }
  if (rest === "") return error(name, `Label ${name} names no coder. ${useForms(knownCoders)}`);
  const parts = rest.split(":");
  const [head = "", second] = parts;
  const headLower = head.toLowerCase();
  if (parts.length > 2) {
    const forms =
      headLower === "split"
        ? SPLIT_FORMS(knownCoders)
        : `${useForms(knownCoders)} Models cannot contain ":".`;
    return error(name, `Label ${name} has too many colons. ${forms}`);
  }

  const priority = /^p(\d+)$/i.exec(head);
  if (priority) {
    const n = Number(priority[1]);
    if (second !== undefined || n > 4 || priority[1]!.length > 1) {
      return error(
        name,
        `Priority label ${name} is not valid. Use fleet:p0 (most urgent) to fleet:p4; the default is p2.`,
      );
    }
    return { kind: "priority", priority: n as Priority };
  }

  if (headLower === "rebase") {
    if (second !== undefined)
      return error(name, `Label ${name} is not valid: fleet:rebase takes no argument.`);
    return { kind: "rebase" };
  }

  if (headLower === "split") {
    if (second === undefined) return { kind: "split" };
    const problem = checkCoder(
      name,
      LABEL_PREFIX.length + head.length + 1,
      second,
      SPLIT_FORMS(knownCoders),
      knownCoders,
    );
    if (problem) return error(name, problem);
    return { kind: "split", coder: second };
  }

  const coderProblem = checkCoder(name, LABEL_PREFIX.length, head, useForms(knownCoders), knownCoders);
  if (coderProblem) return error(name, coderProblem);
  if (second === undefined) return { kind: "coder", coder: head };
  const modelProblem = checkModel(name, head, second);
  if (modelProblem) return error(name, modelProblem);
  return { kind: "coder", coder: head, model: second };
}

export interface TaskRequest {
  coder: string;
  model?: string;
}

export interface TaskRequestFromLabels {
  /** One per distinct coder label; two or more means A/B runs of the same issue. */
  requests: TaskRequest[];
  /** The most urgent priority label present, else the default (2). */
  priority: Priority;
  /** `fleet:split[:<coder>]` when present. */
  split?: { coder?: string };
  rebase: boolean;
  errors: Array<{ label: string; message: string }>;
}

/** What an issue's full label set asks for. */
export function taskRequestFromLabels(
  labelNames: readonly string[],
  knownCoders: readonly string[],
): TaskRequestFromLabels {
  const requests: TaskRequest[] = [];
  const seen = new Set<string>();
  const errors: Array<{ label: string; message: string }> = [];
  let priority: Priority | undefined;
  let split: { coder?: string } | undefined;
  let rebase = false;
  for (const name of labelNames) {
    const parsed = parseFleetLabel(name, knownCoders);
    switch (parsed.kind) {
      case "none":
        break;
      case "error":
        errors.push({ label: parsed.label, message: parsed.message });
        break;
      case "priority":
        priority =
          priority === undefined ? parsed.priority : (Math.min(priority, parsed.priority) as Priority);
        break;
      case "split":
        if (!split?.coder) split = parsed.coder === undefined ? {} : { coder: parsed.coder };
        break;
      case "rebase":
        rebase = true;
        break;
      case "coder": {
        const key = `${parsed.coder}\u0000${parsed.model ?? ""}`;
        if (seen.has(key)) break;
        seen.add(key);
        requests.push(
          parsed.model === undefined ? { coder: parsed.coder } : { coder: parsed.coder, model: parsed.model },
        );
        break;
      }
    }
  }
  const result: TaskRequestFromLabels = { requests, priority: priority ?? DEFAULT_PRIORITY, rebase, errors };
  if (split) result.split = split;
  return result;
}

export interface LabelDefinition {
  name: string;
  /** Six hex digits without "#", as GitHub's label API takes it. */
  color: string;
  description: string;
}

const PRIORITY_COLORS = ["b60205", "d93f0b", "fbca04", "0e8a16", "c5def5"] as const;
const PRIORITY_WORDS = ["most urgent", "urgent", "normal (default)", "low", "lowest"] as const;

/** The labels to create in a repository so maintainers can pick them from GitHub's label menu. */
export function fleetLabelDefinitions(knownCoders: readonly string[]): LabelDefinition[] {
  const defs: LabelDefinition[] = knownCoders.map((coder) => ({
    name: `fleet:${coder}`,
    color: "5319e7",
    description: `Fleet: run this issue with ${coder} (add :<model> to pick a model)`,
  }));
  for (let p = 0; p <= 4; p++) {
    defs.push({
      name: `fleet:p${p}`,
      color: PRIORITY_COLORS[p]!,
      description: `Fleet priority ${p}: ${PRIORITY_WORDS[p]}`,
    });
  }
  defs.push({ name: "fleet:split", color: "1d76db", description: "Fleet: split this issue into sub-tasks" });
  defs.push({ name: "fleet:rebase", color: "0052cc", description: "Fleet: rebase this task's pull request" });
  return defs;
}
