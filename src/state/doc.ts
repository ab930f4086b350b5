import type { Task } from "../core/task.ts";
import { isTaskState } from "../core/task.ts";
import type { TokenUsage } from "../core/usage.ts";
import { StateCorruptError } from "./errors.ts";

export const STATE_DOC_VERSION = 1;
/** Paths inside the state branch (and inside `$FLEET_HOME/state`). */
export const STATE_PATH = ".fleet/state.json";
export const BEADS_PATH = ".beads/issues.jsonl";

/** Overrides set with `fleet config set ...`; they win over `.github/fleet.yml`. */
export interface StateConfigOverrides {
  max_concurrent?: number;
  [key: string]: unknown;
}

/** Totals for one coder on one day. */
export interface LedgerEntry {
  runs: number;
  usage: TokenUsage;
  costUsd: number;
}

/** `ledger[day "YYYY-MM-DD"][coder]`. */
export type Ledger = Record<string, Record<string, LedgerEntry>>;

export interface FleetStateDoc {
  version: 1;
  config: StateConfigOverrides;
  /** Active and recent tasks by task (bead) id. */
  tasks: Record<string, Task>;
  ledger: Ledger;
  /** Fields a newer Fleet of the same version may add are kept as they are. */
  [key: string]: unknown;
}

export const emptyStateDoc = (): FleetStateDoc => ({ version: 1, config: {}, tasks: {}, ledger: {} });

/** Two-space JSON with a final newline, so the branch diffs read well. */
export const serializeStateDoc = (doc: FleetStateDoc): string => `${JSON.stringify(doc, null, 2)}\n`;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Parses `.fleet/state.json`. Empty text means "not created yet" and gives an empty document;
 * anything else that is not a version-1 document throws `StateCorruptError`.
 */
export function parseStateDoc(text: string, where: string, remedy: string): FleetStateDoc {
  if (text.trim() === "") return emptyStateDoc();
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new StateCorruptError(where, `not valid JSON (${(error as Error).message})`, remedy);
  }
  if (!isRecord(raw)) throw new StateCorruptError(where, "the document is not a JSON object", remedy);
  if (raw.version !== STATE_DOC_VERSION) {
    const newer = typeof raw.version === "number" && raw.version > STATE_DOC_VERSION;
    throw new StateCorruptError(
      where,
      newer
        ? `it has version ${raw.version}, written by a newer Fleet (this one reads version ${STATE_DOC_VERSION})`
        : `unknown version ${JSON.stringify(raw.version)} (expected ${STATE_DOC_VERSION})`,
      newer ? `upgrade Fleet, or ${remedy}` : remedy,
    );
  }
  for (const key of ["config", "tasks", "ledger"] as const) {
    if (raw[key] !== undefined && !isRecord(raw[key])) {
      throw new StateCorruptError(where, `"${key}" is not an object`, remedy);
    }
  }
  const tasks = (raw.tasks ?? {}) as Record<string, unknown>;
  for (const [id, task] of Object.entries(tasks)) {
    if (
      !isRecord(task) ||
      typeof task.id !== "string" ||
      !isTaskState(task.state) ||
      typeof task.issue !== "number"
    ) {
      throw new StateCorruptError(
        where,
        `task "${id}" is not a task record (needs id, issue and a known state)`,
        remedy,
      );
    }
  }
  return {
    ...raw,
    version: 1,
    config: raw.config ?? {},
    tasks: tasks,
    ledger: raw.ledger ?? {},
  } as FleetStateDoc;
}

/** Deep copy, so a mutation can edit what it is given without touching the store's cache. */
export const cloneStateDoc = (doc: FleetStateDoc): FleetStateDoc => structuredClone(doc);

/** Adds one run's figures to `ledger[day][coder]`; returns a new document. */
export function recordLedger(
  doc: FleetStateDoc,
  input: { day: string; coder: string; usage?: Partial<TokenUsage>; costUsd?: number | null; runs?: number },
): FleetStateDoc {
  const day = { ...(doc.ledger[input.day] ?? {}) };
  const prev = day[input.coder] ?? {
    runs: 0,
    usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
    costUsd: 0,
  };
  const u = input.usage ?? {};
  day[input.coder] = {
    runs: prev.runs + (input.runs ?? 1),
    usage: {
      input: prev.usage.input + (u.input ?? 0),
      output: prev.usage.output + (u.output ?? 0),
      cacheRead: prev.usage.cacheRead + (u.cacheRead ?? 0),
      cacheWrite: prev.usage.cacheWrite + (u.cacheWrite ?? 0),
      reasoning: prev.usage.reasoning + (u.reasoning ?? 0),
    },
    costUsd: prev.costUsd + (input.costUsd ?? 0),
  };
  return { ...doc, ledger: { ...doc.ledger, [input.day]: day } };
}
