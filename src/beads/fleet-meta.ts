import type { Task, TaskState } from "../core/task.ts";
import { isTaskState } from "../core/task.ts";
import type { BeadDependency, BeadIssue } from "./record.ts";

/**
 * Fleet's own fields of a task, kept in the bead's `metadata.fleet` so that `bd` and other beads
 * tools carry them along untouched. Beads' own fields hold what beads understands (title, status,
 * priority, timestamps, external_ref "gh-<n>", `blocks` dependencies).
 */
export interface FleetMeta {
  repo: string;
  issue: number;
  coder: string;
  model: string;
  state: TaskState;
  attempts: number;
  queuedAt: string;
  branch?: string;
  pr?: number;
  runId?: string;
  reason?: string;
  resetAt?: string;
  requestedBy?: string;
}

const FLEET_KEY = "fleet";

/** `gh-<n>` for a GitHub issue number. */
export const externalRefFor = (issue: number): string => `gh-${issue}`;

/** The GitHub issue number of an `external_ref` like "gh-12"; undefined otherwise. */
export function issueNumberOf(bead: BeadIssue): number | undefined {
  const m = /^gh-(\d+)$/.exec(bead.external_ref ?? "");
  return m ? Number(m[1]) : undefined;
}

/**
 * Beads status for a task state. Failed stays "blocked" rather than "closed" so that tasks that
 * depend on it stay blocked in `bd ready` (a closed blocker unblocks its dependents).
 */
export function beadStatusFor(state: TaskState): string {
  switch (state) {
    case "queued":
    case "rate-limited":
      return "open";
    case "blocked":
    case "failed":
      return "blocked";
    case "dispatched":
    case "planning":
    case "awaiting-approval":
    case "running":
    case "pr-open":
    case "waiting":
      return "in_progress";
    case "done":
    case "cancelled":
      return "closed";
  }
}

/** Fleet's fields of a bead, or undefined when it carries none (or they are not Fleet's shape). */
export function fleetMetaOf(bead: BeadIssue): FleetMeta | undefined {
  const meta = bead.metadata?.[FLEET_KEY];
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) return undefined;
  const m = meta as Record<string, unknown>;
  if (
    typeof m.repo !== "string" ||
    typeof m.issue !== "number" ||
    typeof m.coder !== "string" ||
    typeof m.model !== "string" ||
    !isTaskState(m.state)
  ) {
    return undefined;
  }
  return m as unknown as FleetMeta;
}

function fleetMetaFor(task: Task): FleetMeta {
  const meta: FleetMeta = {
    repo: task.repo,
    issue: task.issue,
    coder: task.coder,
    model: task.model,
    state: task.state,
    attempts: task.attempts,
    queuedAt: task.queuedAt,
  };
  if (task.branch !== undefined) meta.branch = task.branch;
  if (task.pr !== undefined) meta.pr = task.pr;
  if (task.runId !== undefined) meta.runId = task.runId;
  if (task.reason !== undefined) meta.reason = task.reason;
  if (task.resetAt !== undefined) meta.resetAt = task.resetAt;
  if (task.requestedBy !== undefined) meta.requestedBy = task.requestedBy;
  return meta;
}

export interface BeadFromTaskOptions {
  /** The bead as it is now; its other fields (labels, comments, unknown fields, other deps) are kept. */
  existing?: BeadIssue;
  /** GitHub issue number -> bead id, to turn `dependsOn` into `blocks` dependencies. */
  beadIdForIssue?: (issue: number) => string | undefined;
  /** Written as created_by on a new bead. */
  createdBy?: string;
}

/**
 * The bead for a task. `dependsOn` issues that have a bead become `blocks` dependencies; `blocks`
 * dependencies on other Fleet beads that the task no longer depends on are dropped, every other
 * dependency is kept. A rate-limited task is open with `defer_until` = its reset time, so `bd ready`
 * hides it until then.
 */
export function beadFromTask(task: Task, options: BeadFromTaskOptions = {}): BeadIssue {
  const existing = options.existing;
  const status = beadStatusFor(task.state);
  const bead: BeadIssue = {
    ...existing,
    id: task.id,
    title: task.title,
    status,
    priority: task.priority,
    issue_type: existing?.issue_type ?? "task",
    created_at: existing?.created_at ?? task.createdAt,
    updated_at: task.updatedAt,
    external_ref: externalRefFor(task.issue),
    metadata: { ...existing?.metadata, [FLEET_KEY]: fleetMetaFor(task) },
  };
  if (existing === undefined && options.createdBy !== undefined) bead.created_by = options.createdBy;

  if (status === "in_progress") bead.started_at = existing?.started_at ?? task.updatedAt;
  if (status === "closed") {
    bead.closed_at =
      existing?.status === "closed" && existing.closed_at ? existing.closed_at : task.updatedAt;
    bead.close_reason =
      task.state === "cancelled" ? `cancelled${task.reason ? `: ${task.reason}` : ""}` : "done";
  } else {
    delete bead.closed_at;
    delete bead.close_reason;
  }
  if (task.state === "rate-limited" && task.resetAt !== undefined) bead.defer_until = task.resetAt;
  else delete bead.defer_until;

  bead.dependencies = dependenciesFor(task, existing, options.beadIdForIssue);
  if (bead.dependencies.length === 0) delete bead.dependencies;
  return bead;
}

function dependenciesFor(
  task: Task,
  existing: BeadIssue | undefined,
  beadIdForIssue: ((issue: number) => string | undefined) | undefined,
): BeadDependency[] {
  const wanted = new Set<string>();
  for (const issue of task.dependsOn) {
    const id = beadIdForIssue?.(issue);
    if (id !== undefined && id !== task.id) wanted.add(id);
  }
  const kept: BeadDependency[] = [];
  for (const dep of existing?.dependencies ?? []) {
    if (dep.type === "blocks" && !wanted.has(dep.depends_on_id) && isFleetBlock(dep)) continue;
    kept.push(dep);
    if (dep.type === "blocks") wanted.delete(dep.depends_on_id);
  }
  for (const id of [...wanted].sort()) {
    kept.push({
      issue_id: task.id,
      depends_on_id: id,
      type: "blocks",
      created_at: task.updatedAt,
      created_by: "fleet",
    });
  }
  return kept;
}

/** Fleet marks the `blocks` edges it writes with created_by "fleet"; only those does it remove. */
const isFleetBlock = (dep: BeadDependency): boolean => dep.created_by === "fleet";
