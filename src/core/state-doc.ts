import { z } from "zod";
import { TASK_STATES, type Task, type TaskState } from "./task.ts";
import type { TokenUsage } from "./usage.ts";

/**
 * The state document (or the branch holding it) is not something this Fleet can read. Never
 * overwritten: the message says what is wrong and what the user can do about it.
 */
export class StateCorruptError extends Error {
  override readonly name = "StateCorruptError";
  readonly path: string;
  readonly detail: string;
  readonly remedy: string;
  constructor(
    /** Where the bad document lives, e.g. "fleet/state:.fleet/state.json" or a local file path. */
    path: string,
    /** What exactly is wrong with it. */
    detail: string,
    /** What to do, e.g. "fix or revert the last commit on fleet/state". */
    remedy: string,
  ) {
    super(`Fleet state at ${path} is unreadable: ${detail}. Fleet will not overwrite it; ${remedy}.`);
    this.path = path;
    this.detail = detail;
    this.remedy = remedy;
  }
}

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
  /**
   * When Fleet last answered a person who may not drive it, by `<issue>:<login>`, in epoch seconds:
   * at most one such reply per person per issue per hour. Pruned of entries past the hour on each write.
   */
  replies?: Record<string, number>;
  /**
   * The state branch was deleted and started over: no task is dispatched before `until` (RFC3339), by
   * when any run still going from before has stopped (its worker finds its task gone at its next
   * heartbeat) or its lease would have run out.
   */
  resetHold?: { until: string; reason: string };
  /** Fields a newer Fleet of the same version may add are kept as they are. */
  [key: string]: unknown;
}

export const emptyStateDoc = (): FleetStateDoc => ({ version: 1, config: {}, tasks: {}, ledger: {} });

/** Two-space JSON with a final newline, so the branch diffs read well. */
export const serializeStateDoc = (doc: FleetStateDoc): string => `${JSON.stringify(doc, null, 2)}\n`;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

// What a record must hold for Fleet to act on it. Records may carry fields a newer Fleet of the same
// version added (kept as they are); a field Fleet knows must have the right shape, so a hand edit or a
// bad merge is reported naming the record and the field, never acted on (a task in no known state, a
// lease in slot -1) and never overwritten.
const time = z.string().refine((s) => !Number.isNaN(Date.parse(s)), "must be an RFC3339 time");
const count = z.number().int().min(0);
const issueNumber = z.number().int().positive();

const LeaseSchema = z.looseObject({
  holder: z.string().min(1),
  slot: count,
  acquiredAt: time,
  heartbeatAt: time,
  expiresAt: time,
  process: z
    .looseObject({
      host: z.string(),
      bootId: z.string(),
      pidNs: z.string(),
      uid: z.number().int(),
      pid: z.number().int().positive(),
      start: z.string(),
    })
    .optional(),
});

const PinSchema = z.looseObject({
  sha256: z.string().regex(/^[0-9a-f]{64}$/, "must be 64 lowercase hex digits"),
  at: time,
  by: z.string(),
  ignoredEdit: z.looseObject({ by: z.string(), at: time }).optional(),
});

const TaskSchema = z.looseObject({
  id: z.string().min(1),
  repo: z.string().min(1),
  issue: issueNumber,
  title: z.string(),
  coder: z.string().min(1),
  model: z.string().min(1),
  priority: z.number().int().min(0).max(4),
  state: z.enum(TASK_STATES as [TaskState, ...TaskState[]]),
  dependsOn: z.array(issueNumber),
  createdAt: time,
  updatedAt: time,
  queuedAt: time,
  attempts: count,
  branch: z.string().min(1).optional(),
  pr: issueNumber.optional(),
  runId: z.string().optional(),
  lease: LeaseSchema.optional(),
  reason: z.string().optional(),
  resetAt: time.optional(),
  stopping: z.looseObject({ holder: z.string().min(1), until: time }).optional(),
  totals: z.looseObject({ usage: z.record(z.string(), z.number()) }).optional(),
  requestedBy: z.string().optional(),
  approved: z.boolean().optional(),
  runUrl: z.string().optional(),
  instructions: z.string().optional(),
  files: z.array(z.string()).optional(),
  epic: issueNumber.optional(),
  rebase: z.looseObject({ why: z.string(), onlyIfConflicting: z.boolean() }).optional(),
  runs: z.array(z.looseObject({ at: time })).optional(),
  result: z.looseObject({ attempt: count }).optional(),
  pin: PinSchema.optional(),
  review: z.looseObject({ pr: issueNumber }).optional(),
  question: z
    .looseObject({
      text: z.string(),
      askedAt: time,
      answer: z.looseObject({ text: z.string(), by: z.string(), at: time }).optional(),
    })
    .optional(),
  context: z
    .looseObject({
      tokens: count,
      window: z.number().int().positive(),
      at: time,
      windowAssumed: z.boolean().optional(),
    })
    .optional(),
});

const LedgerEntrySchema = z.looseObject({
  runs: count,
  usage: z.record(z.string(), z.number()),
  costUsd: z.number(),
});

const StateDocSchema = z.looseObject({
  version: z.literal(STATE_DOC_VERSION),
  config: z.record(z.string(), z.unknown()).optional(),
  tasks: z
    .record(z.string(), TaskSchema)
    .superRefine((tasks, ctx) => {
      for (const [key, task] of Object.entries(tasks)) {
        if (task.id !== key)
          ctx.addIssue({ code: "custom", path: [key, "id"], message: `must be the record's key "${key}"` });
      }
    })
    .optional(),
  ledger: z.record(z.string(), z.record(z.string(), LedgerEntrySchema)).optional(),
  replies: z.record(z.string(), count).optional(),
  resetHold: z.object({ until: z.iso.datetime({ offset: true }), reason: z.string() }).optional(),
});

const shown = (value: unknown): string => {
  if (value === undefined) return "missing";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}...` : text;
};

/** One schema problem in words: which record, which field, what is wrong, what is there. */
function describeProblem(issue: z.core.$ZodIssue, raw: unknown): string {
  const path = issue.path.map(String);
  let value: unknown = raw;
  for (const k of issue.path)
    value = isRecord(value) || Array.isArray(value) ? (value as never)[k] : undefined;
  const [head, a, b, ...rest] = path;
  let where: string;
  if (head === "tasks" && a !== undefined) {
    const field = [b, ...rest].filter((p) => p !== undefined).join(".");
    where = field ? `task "${a}", field "${field}"` : `task "${a}"`;
  } else if (head === "ledger" && a !== undefined) {
    const field = rest.join(".");
    where =
      b === undefined
        ? `ledger day "${a}"`
        : `ledger entry "${a}"/"${b}"${field ? `, field "${field}"` : ""}`;
  } else if (head === "replies" && a !== undefined) where = `reply record "${a}"`;
  else where = path.length ? `field "${path.join(".")}"` : "the document";
  if (value === undefined && issue.code === "invalid_type") return `${where}: it is missing`;
  return `${where}: ${issue.message.replace(/^Invalid input: /, "")} (got ${shown(value)})`;
}

/**
 * Parses `.fleet/state.json`. Empty text means "not created yet" and gives an empty document;
 * anything else that is not a valid version-1 document throws `StateCorruptError`, naming the record
 * and field that are wrong.
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
  const checked = StateDocSchema.safeParse(raw);
  if (!checked.success) {
    const problems = checked.error.issues.map((i) => describeProblem(i, raw));
    const shownProblems = problems.slice(0, 3).join("; ");
    const more = problems.length > 3 ? `; and ${problems.length - 3} more` : "";
    throw new StateCorruptError(where, `${shownProblems}${more}`, remedy);
  }
  // The document as written (not the schema's copy): fields Fleet does not know keep their bytes.
  return {
    ...raw,
    version: 1,
    config: raw.config ?? {},
    tasks: raw.tasks ?? {},
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
