import { isDiscoveredBead, linkDiscoveredBeads } from "../../beads/discovered.ts";
import { type FleetConfig, isDefaultModel } from "../../core/config.ts";
import {
  filedDiscoveries,
  followUpsToFile,
  mayQueueDiscovered,
  planDiscoveredIssues,
} from "../../core/discovered.ts";
import { LABEL_PREFIX } from "../../core/labels.ts";
import { redactSecrets } from "../../core/redact.ts";
import type { Task } from "../../core/task.ts";
import type { GitHub, RepoRef } from "../../github/port.ts";
import type { RepoQueue } from "../../queue/repo-queue.ts";
import type { StateStore } from "../../state/store.ts";
import type { TaskOutcome } from "../3-attempt.ts";
import { ResultSchema } from "../workspace/artifacts.ts";

export interface DiscoveredWorkDeps {
  github: GitHub;
  repo: RepoRef;
  store: StateStore;
  queue: RepoQueue;
  config: FleetConfig;
  clock?: () => Date;
  log?: (message: string) => void;
  /** Values that must never reach an issue (the worker's secrets and the coder's credentials). */
  secrets?: string[];
  credentialFor?: (coder: string) => { name: string; value: string } | undefined;
  credentialValue?: (name: string) => string | undefined;
}

/** The label that gave the task its coder (and its model, when it is not the coder's default). */
export function coderLabelOf(task: Pick<Task, "coder" | "model">, config: FleetConfig): string {
  return isDefaultModel(config, task.coder, task.model)
    ? `${LABEL_PREFIX}${task.coder}`
    : `${LABEL_PREFIX}${task.coder}:${task.model}`;
}

/**
 * After a finished run: each follow-up in the agent's RESULT.json (at most `max_follow_ups` of them;
 * the PR body and the run report say how many were left out) becomes an issue that says it was
 * discovered while working on the task's issue (and PR), linked in beads to the task's bead with a
 * `discovered-from` dependency. With `auto_label_discovered` the issues get the task's coder label
 * and are queued (Fleet's own labels do not drive the app), unless the task is itself an agent's
 * work (a follow-up Fleet filed, a split's sub-issue): one generation without a person, no more.
 * Processing the same run again files nothing twice: the issues carry a marker per follow-up. Never
 * throws; returns the issue numbers.
 */
export async function fileDiscoveredWork(
  task: Task,
  outcome: TaskOutcome,
  deps: DiscoveredWorkDeps,
): Promise<number[]> {
  if (outcome.outcome !== "pr-opened" && outcome.outcome !== "no-changes") return [];
  const parsed = ResultSchema.safeParse(outcome.artifacts.result);
  if (!parsed.success || parsed.data.followUps.length === 0) return [];
  const log = deps.log ?? (() => {});
  const now = (deps.clock ?? (() => new Date()))().toISOString();
  try {
    const coderLabel = coderLabelOf(task, deps.config);
    const autoLabel = deps.config.auto_label_discovered;
    const maxFollowUps = deps.config.max_follow_ups;
    // Whether the task is an agent's work matters only when follow-ups may queue: read the state then.
    const state = autoLabel ? await deps.store.read() : undefined;
    const taskIsAgentWork =
      task.epic !== undefined || (state !== undefined && isDiscoveredBead(state.beads, task.id));
    const queue = mayQueueDiscovered({ autoLabel, taskIsAgentWork });
    const pr = outcome.pr?.number ?? task.pr;
    // Issues filed since the task began are the only ones that can carry its markers.
    const recent = await deps.github.issues.listForRepo(deps.repo, { state: "all", since: task.createdAt });
    // The agent wrote these; they go public as issues, so anything secret is redacted first.
    const known = [
      ...(deps.secrets ?? []),
      ...[deps.credentialFor?.(task.coder)?.value],
      ...(deps.config.coders[task.coder]?.credentials ?? []).map((n) => deps.credentialValue?.(n)),
    ].filter((v): v is string => typeof v === "string" && v.length > 0);
    const plan = planDiscoveredIssues({
      followUps: parsed.data.followUps.map((f) => redactSecrets(f, known)),
      taskId: task.id,
      issue: task.issue,
      ...(pr !== undefined ? { pr } : {}),
      coderLabel,
      autoLabel,
      taskIsAgentWork,
      maxFollowUps,
      existingBodies: recent.map((i) => i.body ?? ""),
    });
    const leftOut = followUpsToFile(parsed.data.followUps, maxFollowUps).leftOut;
    if (leftOut > 0)
      log(`${task.id}: ${leftOut} follow-ups over max_follow_ups (${maxFollowUps}) were not filed`);
    if (!queue && autoLabel) log(`${task.id} is an agent's work: its follow-ups wait for a person's label`);
    const created: Array<{ number: number; title: string; body: string }> = [];
    for (const item of plan) {
      const data = await deps.github.issues.create(deps.repo, {
        title: item.title,
        body: item.body,
        ...(item.labels.length ? { labels: item.labels } : {}),
      });
      created.push({ number: data.number, title: item.title, body: item.body });
    }
    const all = [
      ...recent.map((i) => ({ number: i.number, title: i.title, body: i.body ?? "" })),
      ...created,
    ];
    const filed = filedDiscoveries(task.id, all);
    const discovered = all.filter((i) => [...filed.values()].includes(i.number));

    if (queue && state) {
      const { doc } = state;
      const hasTask = new Set(Object.values(doc.tasks).map((t) => t.issue));
      for (const i of discovered) {
        // A rerun queues only what is not queued yet (a finished discovered task is not run again).
        if (hasTask.has(i.number)) continue;
        await deps.queue.enqueue({
          issue: i.number,
          title: i.title,
          // Fleet wrote this text: it is the pinned prompt.
          body: i.body,
          coder: task.coder,
          model: task.model,
          priority: task.priority,
          dependsOn: [],
          requestedBy: task.requestedBy ?? "fleet",
        });
      }
    }
    if (discovered.length > 0) {
      await deps.store.update(({ beads }) => {
        const next = linkDiscoveredBeads(
          beads,
          task.id,
          discovered.map((i) => ({ issue: i.number, title: i.title })),
          now,
        );
        if (next === beads) return null;
        return {
          beads: next,
          message: `discovered-from gh-${task.issue} (${task.id}): ${discovered.map((i) => `gh-${i.number}`).join(", ")}`,
        };
      });
    }
    return discovered.map((i) => i.number);
  } catch (error) {
    // The run's outcome stands; the follow-ups are still listed in its pull request.
    log(`filing the follow-ups of ${task.id} as issues failed: ${(error as Error).message}`);
    return [];
  }
}
