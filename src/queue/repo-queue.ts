import type { FleetConfig } from "../core/config.ts";
import { queuePosition } from "../core/scheduler.ts";
import type { Priority, Task, TaskState } from "../core/task.ts";
import type { FleetStateDoc } from "../state/doc.ts";
import type { Mutation, StateStore } from "../state/store.ts";
import { syncBeads } from "./beads-sync.ts";
import type { Dispatcher } from "./dispatcher.ts";
import type { Tracker } from "./tracker.ts";
import {
  applySchedule,
  effectiveConfig,
  enqueueTask,
  findTask,
  moveTask,
  patchTask,
  type TaskChange,
  type TransitionResult,
  tasksOf,
} from "./transitions.ts";

export interface RepoQueueDeps {
  repo: string;
  store: StateStore;
  /** `.github/fleet.yml` as loaded; `config set` overrides in the state are applied on top. */
  fileConfig: FleetConfig;
  dispatcher: Dispatcher;
  tracker?: Tracker;
  clock?: () => Date;
  /** Lease holder name for dispatched tasks not yet claimed by a worker. */
  holder?: string;
  leaseTtlMs?: number;
  log?: (message: string) => void;
}

export interface Outcome {
  applied: boolean;
  task?: Task;
  message?: string;
}

/**
 * The task queue of one repository: every operation is one compare-and-swap transition on the
 * repository state (beads mirror included), then its side effects (dispatch, tracking comments).
 * The app, the CLI and the workers all go through it.
 */
export function createRepoQueue(deps: RepoQueueDeps) {
  const clock = deps.clock ?? (() => new Date());
  const now = () => clock().toISOString();
  const holder = deps.holder ?? `dispatch:${deps.dispatcher.mode}`;
  let lastDoc: FleetStateDoc | undefined;

  /** Runs a transition in a CAS update, keeping the beads mirror in step with every changed task. */
  async function commit(
    transitionFn: (doc: FleetStateDoc) => (TransitionResult & { extra?: unknown }) | null,
  ): Promise<{ result: TransitionResult | null; doc: FleetStateDoc }> {
    let last: TransitionResult | null = null;
    const mutation: Mutation = ({ doc, beads }) => {
      last = transitionFn(doc);
      if (!last || last.changes.length === 0) return null;
      const all = tasksOf(last.doc);
      return {
        doc: last.doc,
        beads: syncBeads(
          beads,
          last.changes.map((c) => c.task),
          all,
        ),
        message: last.messages.join("\n") || "update tasks",
      };
    };
    const update = await deps.store.update(mutation);
    lastDoc = update.snapshot.doc;
    return { result: update.applied ? last : (last as TransitionResult | null), doc: update.snapshot.doc };
  }

  const config = (doc: FleetStateDoc) => effectiveConfig(deps.fileConfig, doc);

  async function show(changes: readonly TaskChange[], doc: FleetStateDoc): Promise<void> {
    if (!deps.tracker) return;
    const tasks = tasksOf(doc);
    const cap = config(doc).max_concurrent;
    await Promise.all(
      changes.map(({ task }) => {
        const pos =
          task.state === "queued" ? queuePosition(tasks, task.id, { max_concurrent: cap }) : undefined;
        return deps.tracker!.show(task.issue, {
          taskKey: task.id,
          taskId: task.id,
          state: task.state,
          coder: task.coder,
          model: task.model,
          priority: task.priority,
          queue: pos,
          blockedBy: task.state === "blocked" ? task.dependsOn : undefined,
          reason: task.reason,
          resetsAt: task.resetAt,
          tokens: task.totals?.usage,
          costUsd: task.totals?.costUsd,
          runUrl: task.runUrl,
        });
      }),
    );
  }

  /** Scheduling pass + dispatch of what it started. */
  async function schedule(closedIssues?: ReadonlySet<number>): Promise<Task[]> {
    const { result, doc } = await commit((d) =>
      applySchedule(d, config(d), { now: now(), holder, leaseTtlMs: deps.leaseTtlMs, closedIssues }),
    );
    if (!result) return [];
    const started = result.changes.filter((c) => c.task.state === "dispatched" && c.from !== "dispatched");
    for (const { task } of started) {
      try {
        const run = await deps.dispatcher.start(task);
        if (run.runId) {
          const withRun = (t: Task): Task => ({
            ...t,
            runId: run.runId,
            ...(run.runUrl ? { runUrl: run.runUrl } : {}),
          });
          await commit((d) =>
            d.tasks[task.id]?.state === "dispatched"
              ? {
                  doc: { ...d, tasks: { ...d.tasks, [task.id]: withRun(d.tasks[task.id]!) } },
                  changes: [{ task: withRun(d.tasks[task.id]!), from: "dispatched" }],
                  messages: [`run ${run.runId} started for gh-${task.issue}`],
                }
              : null,
          );
          // The tracking comment links the run.
          for (const c of result.changes) if (c.task.id === task.id) c.task = withRun(c.task);
        }
      } catch (error) {
        deps.log?.(`dispatch of ${task.id} failed: ${(error as Error).message}`);
        await commit((d) =>
          moveTask(d, task.id, "failed", {
            now: now(),
            reason: `could not start the run: ${(error as Error).message}`,
          }),
        );
      }
    }
    await show(result.changes, doc);
    return result.changes.map((c) => c.task);
  }

  return {
    schedule,
    async snapshot(): Promise<FleetStateDoc> {
      return (await deps.store.read()).doc;
    },
    lastKnown: () => lastDoc,
    config,

    async enqueue(input: {
      issue: number;
      title: string;
      coder: string;
      model: string;
      priority: Priority;
      dependsOn: number[];
      requestedBy: string;
    }): Promise<Outcome> {
      const { result, doc } = await commit((d) => enqueueTask(d, { ...input, repo: deps.repo, now: now() }));
      const task = findTask(doc, { issue: input.issue, coder: input.coder, model: input.model, live: true });
      if (result?.changes.length) await show(result.changes, doc);
      await schedule();
      return { applied: Boolean(result?.changes.length), task };
    },

    /** Moves every live task of the issue (or just `taskId`) to `to`. */
    async move(
      issue: number,
      to: TaskState,
      opts: {
        reason?: string;
        resetAt?: string;
        patch?: Partial<Task>;
        taskId?: string;
        from?: TaskState[];
      } = {},
    ): Promise<Task[]> {
      const { result, doc } = await commit((d) => {
        const targets = tasksOf(d).filter(
          (t) =>
            t.issue === issue &&
            (!opts.taskId || t.id === opts.taskId) &&
            (!opts.from || opts.from.includes(t.state)),
        );
        let acc: TransitionResult = { doc: d, changes: [], messages: [] };
        for (const t of targets) {
          // Already there (an event got ahead of the worker): keep the fields the mover brings.
          const moved =
            t.state === to
              ? opts.patch && patchTask(acc.doc, t.id, opts.patch, now())
              : moveTask(acc.doc, t.id, to, { now: now(), ...opts });
          if (moved)
            acc = {
              doc: moved.doc,
              changes: [...acc.changes, ...moved.changes],
              messages: [...acc.messages, ...moved.messages],
            };
        }
        return acc.changes.length ? acc : null;
      });
      const changed = result?.changes ?? [];
      if (to === "cancelled")
        for (const c of changed) if (c.from) await deps.dispatcher.stop(c.task).catch(() => {});
      await show(changed, doc);
      if (changed.length) await schedule();
      return changed.map((c) => c.task);
    },

    async setConfig(assignments: Array<{ key: string; value: unknown }>, by: string): Promise<void> {
      await deps.store.update(({ doc }) => {
        const next = { ...doc, config: { ...doc.config } };
        for (const a of assignments) {
          if (a.value === null) delete next.config[a.key];
          else next.config[a.key] = a.value;
        }
        return {
          doc: next,
          message: `config set ${assignments.map((a) => `${a.key}=${String(a.value)}`).join(" ")} (by ${by})`,
        };
      });
      await schedule();
    },
  };
}

export type RepoQueue = ReturnType<typeof createRepoQueue>;
