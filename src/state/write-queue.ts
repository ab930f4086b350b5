import type { FleetStateDoc } from "../core/state-doc.ts";
import { StateConflictError } from "./errors.ts";
import type { Mutation, StateStore, UpdateOptions, UpdateResult } from "./store.ts";

export interface WriteQueueOptions {
  /** How long the first mutation of a batch waits for others to join it. */
  maxDelayMs?: number;
  /** A batch closes early when this many mutations are waiting. */
  maxBatch?: number;
  maxRetries?: number;
}

export interface WriteQueue {
  /** Resolves once the batch holding this mutation is committed (or this mutation was dropped). */
  enqueue(
    mutation: Mutation,
    options?: Pick<UpdateOptions, "trustCacheMs" | "retryUntilMs">,
  ): Promise<UpdateResult>;
  /** Writes whatever is waiting now. */
  flush(): Promise<void>;
  /** Commits written by this queue. */
  readonly commits: number;
}

interface Pending {
  mutation: Mutation;
  trustCacheMs: number;
  retryUntilMs?: number;
  resolve: (r: UpdateResult) => void;
  reject: (e: unknown) => void;
}

/**
 * The document as a mutation of a batch gets it: its own top level and tasks map, so a mutation that
 * throws or drops out after changing them leaves the others' document as it was. Transitions replace
 * a task rather than change it (see core/), so the tasks are shared: a deep copy per mutation made a
 * batch cost (mutations x tasks), the burst handler's largest CPU cost at a few hundred tasks.
 */
function detached(doc: FleetStateDoc): FleetStateDoc {
  return { ...doc, config: { ...doc.config }, tasks: { ...doc.tasks }, ledger: { ...doc.ledger } };
}

/**
 * Coalesces mutations that arrive together into one commit: they are applied in arrival order on the
 * freshest state, each may drop out (returns null) or fail (throws) on its own, the commit message lists
 * them, and every caller learns whether its own mutation was applied.
 */
export function createWriteQueue(store: StateStore, opts: WriteQueueOptions = {}): WriteQueue {
  const maxDelayMs = opts.maxDelayMs ?? 50;
  const maxBatch = opts.maxBatch ?? 200;
  const waiting: Pending[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let commits = 0;

  async function writeBatch(batch: Pending[]): Promise<void> {
    let outcomes: Array<"applied" | "dropped" | { error: unknown }> = [];
    const combined: Mutation = (s) => {
      // Runs once per compare-and-swap attempt, so outcomes are recomputed on each fresh state.
      outcomes = [];
      let doc: FleetStateDoc = s.doc;
      let beads = s.beads;
      const messages: string[] = [];
      for (const p of batch) {
        let out: ReturnType<Mutation>;
        try {
          out = p.mutation({ doc: detached(doc), beads });
        } catch (error) {
          outcomes.push({ error });
          continue;
        }
        if (out === null) {
          outcomes.push("dropped");
          continue;
        }
        outcomes.push("applied");
        doc = out.doc ?? doc;
        beads = out.beads ?? beads;
        messages.push(out.message);
      }
      if (messages.length === 0) return null;
      const message =
        messages.length === 1
          ? messages[0]!
          : `${messages.length} transitions\n\n${messages.map((m) => `- ${m.split("\n")[0]}`).join("\n")}`;
      return { doc, beads, message };
    };
    let result: UpdateResult;
    try {
      // A batch that drops out whole is confirmed on fresh state unless every mutation in it trusts the cache.
      const trustCacheMs = Math.min(...batch.map((p) => p.trustCacheMs));
      result = await store.update(combined, { maxRetries: opts.maxRetries, trustCacheMs });
    } catch (error) {
      for (const p of batch) {
        // Given up on the usual retries: a write that must land (a run's end within its lease) goes on
        // alone, beside the queue, whose later batches (other runs' heartbeats and ends) do not wait for it.
        if (error instanceof StateConflictError && p.retryUntilMs !== undefined)
          void store
            .update(p.mutation, { maxRetries: 0, retryUntilMs: p.retryUntilMs, trustCacheMs: p.trustCacheMs })
            .then(p.resolve, p.reject);
        else p.reject(error);
      }
      return;
    }
    if (result.commit) commits++;
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if (o === undefined || o === "dropped") p.resolve({ ...result, applied: false, commit: undefined });
      else if (o === "applied") p.resolve(result);
      else p.reject(o.error);
    });
  }

  let busy = false;
  function flush(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    // One batch at a time per queue, so a queue never races itself.
    running = running.then(async () => {
      busy = true;
      try {
        while (waiting.length > 0) {
          const batch = waiting.splice(0, maxBatch);
          await writeBatch(batch);
        }
      } finally {
        busy = false;
      }
    });
    return running;
  }

  return {
    enqueue(mutation, options = {}) {
      return new Promise<UpdateResult>((resolve, reject) => {
        waiting.push({
          mutation,
          trustCacheMs: options.trustCacheMs ?? 0,
          ...(options.retryUntilMs !== undefined ? { retryUntilMs: options.retryUntilMs } : {}),
          resolve,
          reject,
        });
        if (waiting.length >= maxBatch) void flush();
        // While a batch is being written, what arrives waits for it and goes in the next (group commit):
        // under load batches grow by themselves, and an idle queue makes a lone transition wait only
        // `maxDelayMs` for company.
        else if (!busy && !timer) timer = setTimeout(() => void flush(), maxDelayMs);
      });
    },
    flush,
    get commits() {
      return commits;
    },
  };
}

/**
 * The store seen through a write queue: every update from this process goes through one queue, so the
 * process never races itself (a heartbeat against a transition) and updates arriving together share a commit.
 */
export function coalescingStore(store: StateStore, opts: WriteQueueOptions = {}): StateStore {
  const queue = createWriteQueue(store, opts);
  return {
    read: (o) => store.read(o),
    update: (m, o) => queue.enqueue(m, o),
    // A claim by ref is no commit: it goes to the store at once, beside the queue.
    ...(store.claim ? { claim: store.claim.bind(store) } : {}),
  };
}
