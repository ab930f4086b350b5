import type { FleetConfig } from "../core/config.ts";
import { dispatchHolder, hasRoomFor, takeDispatched, type WorkerRoom } from "../core/leases.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { LeaseProcess, Task } from "../core/task.ts";
import type { Repository } from "../queue/open-repository.ts";
import type { DispatchedTaker, RepoQueue } from "../queue/repo-queue.ts";
import { effectiveConfig } from "../queue/transitions.ts";
import type { ClaimedTask } from "./1-claim.ts";
import { type ExecuteDeps, startIn } from "./execute-task.ts";
import { thisProcess } from "./holder-process.ts";

// A local worker's claims. Its polls claim dispatched tasks as any worker would; and every commit its
// queues write also claims the dispatched tasks it has room for (DispatchedTaker): a run's end commit
// frees a slot, dispatches the next task into it and claims that for the same worker, so the next
// agent starts without waiting for a poll, and no other worker races for it on the shared state head.
// Room is counted the same way on both paths, inside the compare-and-swap (core/leases.ts WorkerRoom).

export interface HandOffOptions {
  name: string;
  concurrency: number;
  repository: Repository;
  /** The worker's jobs by task: a run, or a claim being given back. */
  running: ReadonlyMap<string, Promise<void>>;
  stopping: AbortSignal;
  accepts?: (task: Task, doc: FleetStateDoc) => boolean;
  clock?: () => Date;
  leaseTtlMs?: number;
  log: (message: string) => void;
  /** Runs the task as a job of the worker's (executeTask, with `extra` among its deps). */
  run(
    taskId: string,
    queue: RepoQueue,
    config: FleetConfig,
    extra: Pick<ExecuteDeps, "mayClaim" | "runOver">,
    claimed?: ClaimedTask,
  ): void;
  /** Keeps a job of the worker's that is not a run (a claim given back) until it ends. */
  track(taskId: string, job: Promise<undefined>): void;
}

export interface HandOffs {
  /** A queue for this worker's operations: its commits claim what the worker has room for. */
  queueFor(fileConfig: FleetConfig): RepoQueue;
  /** A poll's claim and run of a dispatched task. */
  start(taskId: string, queue: RepoQueue, config: FleetConfig): void;
  /** A poll read `.github/fleet.yml`: the worker's claims use it from now on. */
  fileRead(config: FleetConfig): Promise<void>;
  /** The worker's job for `taskId` ended (a claim that waited for it begins now). */
  jobEnded(taskId: string): void;
}

export function handOffs(o: HandOffOptions): HandOffs {
  /** Jobs whose run is over (its end being recorded): no agent of theirs counts against the room. */
  const finishing = new Set<string>();
  /** Claims of the worker's own commits for a task an earlier job of it still had. */
  const waitingFor = new Map<string, ClaimedTask>();
  let file: FleetConfig | undefined;
  let self: LeaseProcess | undefined;

  const room = (doc: FleetStateDoc): WorkerRoom => ({
    holder: o.name,
    concurrency: o.concurrency,
    inHand: new Set([...o.running.keys()].filter((id) => !finishing.has(id))),
    ...(o.accepts ? { accepts: (t: Task) => o.accepts!(t, doc) } : {}),
  });

  /** The file as the worker's cache has it now (read again once a minute), for the next claim. */
  const readFile = async () => {
    const loaded = await o.repository.fileConfig().catch(() => undefined);
    if (loaded?.ok) file = loaded.config;
  };

  const taker: DispatchedTaker = {
    take: (doc) => {
      if (o.stopping.aborted || !file) return null;
      return takeDispatched(doc, {
        ...room(doc),
        from: dispatchHolder("local"),
        now: o.clock?.() ?? new Date(),
        ttlMs: o.leaseTtlMs,
        startIn: startIn(effectiveConfig(file, doc)),
        ...(self ? { process: self } : {}),
      });
    },
    taken: (tasks, snapshot) => {
      for (const t of tasks) {
        const task = snapshot.doc.tasks[t.id];
        if (task?.lease?.holder !== o.name) continue;
        const claimed = { task, beads: snapshot.beads, snapshot };
        // An earlier job still has this task (a poll's, whose claim now finds it taken; or the run whose
        // end queued it again): this one begins as that one ends.
        if (o.running.has(t.id)) waitingFor.set(t.id, claimed);
        else begin(t.id, claimed);
      }
    },
  };

  const queueFor = (fileConfig: FleetConfig) => o.repository.queue(fileConfig, { taker });

  const start = (taskId: string, queue: RepoQueue, config: FleetConfig, claimed?: ClaimedTask) =>
    o.run(
      taskId,
      queue,
      config,
      {
        mayClaim: (doc) => hasRoomFor(doc, taskId, room(doc)),
        runOver: async () => {
          finishing.add(taskId);
          await readFile();
        },
      },
      claimed,
    );

  const begin = (taskId: string, claimed: ClaimedTask) => {
    const queue = queueFor(file!);
    if (!o.stopping.aborted) return start(taskId, queue, queue.config(claimed.snapshot.doc), claimed);
    // Claimed as the worker was stopping: the task goes back to the queue, its attempt not spent.
    const back = queue
      .endRun(taskId, {
        holder: o.name,
        to: "queued",
        reason: "its worker stopped before the run began",
        patch: { attempts: Math.max(0, claimed.task.attempts - 1) },
      })
      .then(
        () => undefined,
        (e) => void o.log(`${taskId} could not be given back: ${(e as Error).message}`),
      );
    o.track(taskId, back);
  };

  return {
    queueFor,
    start: (taskId, queue, config) => start(taskId, queue, config),
    async fileRead(config) {
      file = config;
      self ??= await thisProcess();
    },
    jobEnded(taskId) {
      finishing.delete(taskId);
      const next = waitingFor.get(taskId);
      if (!next) return;
      waitingFor.delete(taskId);
      begin(taskId, next);
    },
  };
}
