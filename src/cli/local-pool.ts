import { createHash } from "node:crypto";
import { isTerminal } from "../core/lifecycle.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { Task } from "../core/task.ts";
import { localRepositoryOf } from "../queue/local-issues.ts";
import type { LocalWorker } from "../worker/local-worker.ts";
import { localRepositoryAt } from "./local-repository.ts";
import { type LocalTarget, localRepoName, resolveTarget, type TargetFlags } from "./target.ts";

/**
 * The workers of one `fleet run`. Against GitHub that is one worker; in local mode one queue holds
 * tasks of many repositories, and each repository gets its own worker, which takes only the tasks
 * recorded for it (its clone, worktrees, branches and `.github/fleet.yml` are that repository's).
 */
export interface WorkerPool {
  readonly running: number;
  /** Starts workers for repositories that appeared in the queue, and says once what no worker here can run. */
  refresh(doc: FleetStateDoc): Promise<void>;
  /** Whether a worker of this pool runs the task. */
  serves(task: Task, doc: FleetStateDoc): boolean;
  /** The repositories served, for messages. */
  describe(): string;
  stop(): Promise<void>;
}

export function singleWorkerPool(worker: LocalWorker, where: string): WorkerPool {
  return {
    get running() {
      return worker.running;
    },
    refresh: async () => {},
    serves: () => true,
    describe: () => where,
    stop: () => worker.stop(),
  };
}

/** Starts a worker for one local repository that runs the tasks `accepts` admits. */
export type StartLocalWorker = (
  target: LocalTarget,
  accepts: (task: Task, doc: FleetStateDoc) => boolean,
) => Promise<LocalWorker>;

export interface LocalPoolOptions {
  flags: TargetFlags;
  /** `--repo-path`: serve this repository only. */
  only?: string;
  /** Where `fleet run` was started: tasks queued before repositories were recorded run here when its name matches. */
  cwd: string;
  start: StartLocalWorker;
  print: (line: string) => void;
}

/** Whether a task belongs to the repository at `path`: its recorded one, else (older tasks) by `local/<name>`. */
export function belongsTo(task: Task, doc: FleetStateDoc, path: string): boolean {
  const recorded = localRepositoryOf(doc, task);
  return recorded ? recorded.path === path : task.repo === `local/${localRepoName(path)}`;
}

/**
 * The target a worker for the repository at `path` runs with: named `<name>-<hash of path>`, which
 * names its clone cache (`repos/local/<name>-<hash>.git`). Keyed by the path alone, so two folders of
 * one name never share a cache, whichever `fleet run` (or restart, in whatever order) serves them.
 */
export function cacheKeyed(target: LocalTarget, path: string): LocalTarget {
  const repo = `${localRepoName(path)}-${createHash("sha256").update(path).digest("hex").slice(0, 8)}`;
  return { ...target, repo: { owner: "local", repo }, full: `local/${repo}` };
}

export async function startLocalPool(opts: LocalPoolOptions): Promise<WorkerPool> {
  const workers = new Map<string, LocalWorker>();
  const refused = new Set<string>();
  const said = new Set<string>();
  const add = async (path: string) => {
    const target = cacheKeyed(
      (await resolveTarget({ ...opts.flags, local: true, "repo-path": path })) as LocalTarget,
      path,
    );
    workers.set(path, await opts.start(target, (task, doc) => belongsTo(task, doc, path)));
    opts.print(`serving ${path}`);
  };
  if (opts.only !== undefined) await add((await localRepositoryAt(opts.only)).path);
  else {
    // The repository `fleet run` was started in (if any) is served too: it runs older tasks of its name.
    const here = await localRepositoryAt(opts.cwd).catch(() => undefined);
    if (here)
      await add(here.path).catch((e) => opts.print(`not serving ${here.path}: ${(e as Error).message}`));
  }
  const serves = (task: Task, doc: FleetStateDoc) =>
    [...workers.keys()].some((path) => belongsTo(task, doc, path));

  return {
    get running() {
      return [...workers.values()].reduce((n, w) => n + w.running, 0);
    },
    serves,
    describe: () => [...workers.keys()].join(", ") || "no repository yet",
    async refresh(doc) {
      const live = Object.values(doc.tasks).filter((t) => !isTerminal(t.state));
      if (opts.only === undefined) {
        for (const t of live) {
          const path = localRepositoryOf(doc, t)?.path;
          if (!path || workers.has(path) || refused.has(path)) continue;
          try {
            await add(path);
          } catch (error) {
            refused.add(path);
            opts.print(
              `cannot serve ${path} (task ${t.id}, #${t.issue}): ${(error as Error).message} Its tasks wait; \`fleet kill <id>\` drops them.`,
            );
          }
        }
      }
      for (const t of live) {
        if (t.state !== "dispatched" || said.has(t.id) || serves(t, doc)) continue;
        said.add(t.id);
        opts.print(unservedMessage(t, doc, opts.only));
      }
    },
    async stop() {
      await Promise.all([...workers.values()].map((w) => w.stop()));
    },
  };
}

function unservedMessage(task: Task, doc: FleetStateDoc, only: string | undefined): string {
  const recorded = localRepositoryOf(doc, task);
  if (!recorded) {
    const name = task.repo.replace(/^local\//, "");
    return `${task.id} (#${task.issue}) was queued before Fleet recorded each task's repository: it runs only in a repository named "${name}". Start \`fleet run\` in it (or pass --repo-path to it).`;
  }
  if (only !== undefined)
    return `${task.id} (#${task.issue}) is for ${recorded.path}, which this worker does not serve (--repo-path ${only}); \`fleet run\` without --repo-path serves every repository in the queue.`;
  return `${task.id} (#${task.issue}) is for ${recorded.path}, which this worker cannot serve (see above).`;
}
