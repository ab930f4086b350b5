import type { PromptPin } from "./prompt-pin.ts";
import type { RunRecord } from "./run-history.ts";
import type { RunTotals } from "./usage.ts";

/** A coder's name ("claude", "codex", "agy", ...): a key of the registry in coders.ts, or one a config adds. */
export type Coder = string;

export type TaskState =
  | "queued"
  | "blocked"
  | "dispatched"
  | "planning"
  | "awaiting-approval"
  | "running"
  | "pr-open"
  | "waiting"
  | "done"
  | "failed"
  | "cancelled"
  | "rate-limited";

/** Every state, in lifecycle order. */
export const TASK_STATES: readonly TaskState[] = [
  "queued",
  "blocked",
  "dispatched",
  "planning",
  "awaiting-approval",
  "running",
  "pr-open",
  "waiting",
  "done",
  "failed",
  "cancelled",
  "rate-limited",
];

/** Beads priority: 0 is most urgent, 2 is the default. */
export type Priority = 0 | 1 | 2 | 3 | 4;
export const DEFAULT_PRIORITY: Priority = 2;

/** A worker's claim on a concurrency slot; it frees the slot once `expiresAt` passes without a heartbeat. */
export interface Lease {
  holder: string;
  slot: number;
  acquiredAt: string;
  heartbeatAt: string;
  expiresAt: string;
  /** The worker process that claimed it, where it could tell (see LeaseProcess). */
  process?: LeaseProcess;
}

/**
 * The process holding a lease and its machine: a worker on the same machine (same host name, boot,
 * PID namespace and user) can tell whether it is still running, and a dead one holds nothing.
 */
export interface LeaseProcess {
  host: string;
  /** The kernel's boot id: a reboot makes every process of the boot before a stranger. */
  bootId: string;
  /** The PID namespace (its inode, as /proc/self/ns/pid names it): a container's pids are not the host's. */
  pidNs: string;
  uid: number;
  pid: number;
  /** The process's start time, in clock ticks since boot (/proc/<pid>/stat): a reused pid starts later. */
  start: string;
}

/** What is asked of Fleet for an issue: the coder and model to run it, its priority, the issues it waits for. */
export interface TaskRequest {
  issue: number;
  title: string;
  coder: string;
  model: string;
  priority: Priority;
  dependsOn: number[];
}

export interface Task {
  /** Bead id, e.g. "fl-a3f". */
  id: string;
  /** "owner/name". */
  repo: string;
  /** GitHub issue number (the bead's external_ref `gh-<n>`). */
  issue: number;
  title: string;
  coder: Coder;
  model: string;
  priority: Priority;
  state: TaskState;
  /** Issue numbers this task waits for. */
  dependsOn: number[];
  /** RFC3339. */
  createdAt: string;
  updatedAt: string;
  /** FIFO key within a priority; reset whenever the task re-enters the queue. */
  queuedAt: string;
  /** Runs started. */
  attempts: number;
  branch?: string;
  pr?: number;
  runId?: string;
  lease?: Lease;
  /** Why the task failed, was cancelled, is blocked or is rate-limited. */
  reason?: string;
  /** Rate-limited: when the provider's limit resets; queued after a failed attempt: when the retry may start (RFC3339). */
  resetAt?: string;
  /**
   * A run that was still going when the task left its slot (a cancel, a merge, a closed PR): its worker
   * stops it at its next heartbeat and reports. The task is not started again before that report, or
   * before `until` (the run's lease), so it never runs twice at once.
   */
  stopping?: { holder: string; until: string };
  totals?: RunTotals;
  requestedBy?: string;
  /** The plan was approved with `/fleet approve`: the next run skips the plan phase. */
  approved?: boolean;
  /** Where the task's run can be followed (an Actions run page). */
  runUrl?: string;
  /** Review-loop instructions (`/fleet <instructions>` on the PR) for the next run on the PR's branch. */
  instructions?: string;
  /**
   * The repository files the task is expected to touch, read from its issue body when it was queued
   * (see `filesNamedIn`); with `serialize_overlapping`, two tasks sharing a file do not run together.
   */
  files?: string[];
  /** The epic this task's issue is a sub-issue of, when Fleet split it off (the epic closes with its last). */
  epic?: number;
  /** The next run rebases the task's open PR onto its base instead of working on the issue. */
  rebase?: RebaseRequest;
  /** Every finished run with its cost, oldest first (the token report has a row per run). */
  runs?: RunRecord[];
  /** What the worker recorded when the last run ended, RESULT.json in figures (the A/B comparison). */
  result?: TaskResultSummary;
  /**
   * The issue text the agent may be given, pinned when the task was queued (or re-pinned by an edit from
   * someone who may drive Fleet); the text itself is the task's bead title and description. See prompt-pin.ts.
   */
  pin?: PromptPin;
  /**
   * How full the agent's context was at its last model turn, recorded as the run goes (with the
   * heartbeat and the run's transitions): see core/context-windows.ts.
   */
  context?: TaskContext;
  /** An agent review of this pull request (the task's issue is the PR): a read-only run that posts one review. */
  review?: PrReviewRequest;
  /** The agent's last question to a person (its `ask_human` tool), and the answer once given. */
  question?: TaskQuestion;
}

/**
 * What the agent asked mid-run (the run then ended `waiting`) and who answered what: the next run
 * resumes the agent's session with the answer, or starts with both in its prompt.
 */
export interface TaskQuestion {
  /** The question as the agent wrote it (bounded; shown with its mentions made inert). */
  text: string;
  /** RFC3339: when the run ended waiting; an unanswered question expires `ask_human.expire_after_hours` later. */
  askedAt: string;
  answer?: { text: string; by: string; at: string };
}

/** What `/fleet review` or `review_on` asks: a review of pull request `pr`. */
export interface PrReviewRequest {
  pr: number;
}

/** The last model turn's context (input + cache read + cache write tokens) against the model's window. */
export interface TaskContext {
  tokens: number;
  window: number;
  /** When the turn was seen (RFC3339). */
  at: string;
  /** The model is not in Fleet's table of windows: `window` is the documented fallback. */
  windowAssumed?: boolean;
}

/** A finished run as the worker recorded it: its attempt and, from a valid RESULT.json, the verdict and tests. */
export interface TaskResultSummary {
  attempt: number;
  /** The run ended without a change to the repository (no PR, nothing pushed). */
  noChanges?: boolean;
  status?: string;
  testsRun?: number;
  testsPassed?: number;
}

const FAILED_TEST = /\b(fail(ed|s|ure|ing)?|errors?|broken)\b|✗|❌/i;
const PASSED_TEST = /\b(ok|pass(ed|es|ing)?|green|success(ful)?)\b|✓|✅/i;

/**
 * RESULT.json's `testsRun` lines ("npm test: ok", "pytest: 2 failed") counted: a line passed when it
 * says so (ok, passed, ✓) and names no failure.
 */
export function summarizeResult(
  attempt: number,
  result?: { status: string; testsRun?: readonly string[] },
): TaskResultSummary {
  if (!result) return { attempt };
  const tests = result.testsRun ?? [];
  return {
    attempt,
    status: result.status,
    testsRun: tests.length,
    testsPassed: tests.filter((t) => PASSED_TEST.test(t) && !FAILED_TEST.test(t)).length,
  };
}

export interface RebaseRequest {
  /** Why, for the PR comment ("#12 was merged", "@mona labeled fleet:rebase"). */
  why: string;
  /** Rebase only when the branch no longer merges cleanly (a merge elsewhere); false when asked for by hand. */
  onlyIfConflicting: boolean;
}

export const isTaskState = (value: unknown): value is TaskState =>
  typeof value === "string" && (TASK_STATES as readonly string[]).includes(value);

export const isPriority = (value: unknown): value is Priority =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= 4;

/** What a new task is made from: who and what it is for, and `now`, when it is queued. */
export type NewTaskInput = Pick<Task, "id" | "repo" | "issue" | "title" | "coder" | "model"> &
  Partial<Pick<Task, "priority" | "dependsOn" | "requestedBy" | "files" | "epic" | "pin" | "review">> & {
    now: string;
  };

/** A fresh task, queued at `now`. */
export function newTask(input: NewTaskInput): Task {
  const task: Task = {
    id: input.id,
    repo: input.repo,
    issue: input.issue,
    title: input.title,
    coder: input.coder,
    model: input.model,
    priority: input.priority ?? DEFAULT_PRIORITY,
    state: "queued",
    dependsOn: [...new Set(input.dependsOn ?? [])].filter((n) => n !== input.issue),
    createdAt: input.now,
    updatedAt: input.now,
    queuedAt: input.now,
    attempts: 0,
  };
  if (input.requestedBy !== undefined) task.requestedBy = input.requestedBy;
  if (input.files && input.files.length > 0) task.files = [...new Set(input.files)];
  if (input.epic !== undefined) task.epic = input.epic;
  if (input.pin !== undefined) task.pin = input.pin;
  if (input.review !== undefined) task.review = input.review;
  return task;
}

/**
 * Whether `task` answers a label (or mention) given at `atMs`: it was made, or queued again (a relabel
 * requeues the same task, keeping its `createdAt`; so do a retry and a review round), at or after it.
 */
export function answersRequestAt(task: Pick<Task, "createdAt" | "queuedAt">, atMs: number): boolean {
  return Date.parse(task.createdAt) >= atMs || Date.parse(task.queuedAt) >= atMs;
}
