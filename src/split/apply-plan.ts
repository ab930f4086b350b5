import { type FleetConfig, modelFor } from "../core/config.ts";
import { DEFAULT_PRIORITY, type Priority, type TaskRequest } from "../core/task.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import {
  renderSplitDone,
  renderSplitRejected,
  renderSubIssueBody,
  splitPlanMarker,
} from "../render/split.ts";
import { type PlannedTask, type PlanProblem, validateSplitPlan } from "./plan.ts";

export interface SubTaskToQueue extends TaskRequest {
  /** The epic: the sub-issue's task remembers it, so its merge can close the epic without reading the issue. */
  epic: number;
  /** The sub-issue's body as Fleet wrote it: the task's pinned prompt. */
  body: string;
}

export interface ApplyPlanDeps {
  github: GitHub;
  repo: RepoRef;
  config: FleetConfig;
  knownCoders: readonly string[];
  /** The coder the epic's `fleet:split[:<coder>]` label named; tasks without their own coder get it. */
  splitCoder: string;
  /**
   * Queues a created sub-issue. Fleet's own labels do not drive the app (bot events are ignored),
   * so the caller queues the tasks itself.
   */
  enqueue: (task: SubTaskToQueue) => Promise<void>;
}

export type ApplyPlanResult =
  | { ok: true; issues: Map<string, number> }
  | { ok: false; problems: PlanProblem[] };

/**
 * Turns a validated split plan into sub-issues of the epic, created dependencies first so each
 * `Depends on #N` names a real issue; labels them `fleet:<coder>[:<model>]` and `fleet:p<n>`, links
 * them as GitHub sub-issues, queues them and posts the task graph. An invalid plan creates nothing:
 * the epic says what was wrong instead.
 */
export async function applySplitPlan(
  epic: number,
  raw: unknown,
  deps: ApplyPlanDeps,
): Promise<ApplyPlanResult> {
  const { github, repo } = deps;
  const checked = validateSplitPlan(raw, deps.knownCoders);
  if (!checked.ok) {
    await upsertMarkedComment(
      github,
      { ...repo, issue_number: epic },
      splitPlanMarker(epic),
      renderSplitRejected(epic, checked.problems),
    );
    return checked;
  }
  // A rerun (e.g. a retried worker) reuses the sub-issues it already created, matched by title.
  const existing = await github.issues.listSubIssues(repo, epic).catch(() => []);
  const byTitle = new Map(existing.map((i) => [i.title, i.number]));

  const issues = new Map<string, number>();
  for (const task of checked.order) {
    const body = subIssueBody(epic, task, issues);
    const number = byTitle.get(task.title) ?? (await createSubIssue(epic, task, body, deps));
    issues.set(task.key, number);
    const coder = task.coder ?? deps.splitCoder;
    await deps.enqueue({
      issue: number,
      title: task.title,
      // The text Fleet wrote is the approved prompt: an edit by someone else later is not used.
      body,
      coder,
      model: modelFor(deps.config, coder, task.model),
      priority: (task.priority ?? DEFAULT_PRIORITY) as Priority,
      dependsOn: task.dependsOn.map((k) => issues.get(k)!),
      epic,
    });
  }
  await upsertMarkedComment(
    github,
    { ...repo, issue_number: epic },
    splitPlanMarker(epic),
    renderSplitDone(epic, checked.plan, issues),
  );
  return { ok: true, issues };
}

const subIssueBody = (epic: number, task: PlannedTask, created: ReadonlyMap<string, number>): string =>
  renderSubIssueBody(
    task.body,
    epic,
    task.key,
    task.dependsOn.map((k) => created.get(k)!),
  );

async function createSubIssue(
  epic: number,
  task: PlannedTask,
  body: string,
  deps: ApplyPlanDeps,
): Promise<number> {
  const { github, repo } = deps;
  const coder = task.coder ?? deps.splitCoder;
  const labels = [
    task.model ? `fleet:${coder}:${task.model}` : `fleet:${coder}`,
    `fleet:p${task.priority ?? DEFAULT_PRIORITY}`,
  ];
  const created = await github.issues.create(repo, { title: task.title, body, labels });
  await github.issues.addSubIssue(repo, epic, created.id);
  return created.number;
}
