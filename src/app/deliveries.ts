import { DEFAULT_STATE_BRANCH } from "../state/store.ts";

/** The deliveries the app has answered and is still handling. */
export interface BackgroundDeliveries {
  /** Deliveries answered whose handlers have not finished. */
  readonly inFlight: number;
  /** Resolves when no delivery is being handled. */
  idle(): Promise<void>;
}

/**
 * What a delivery's handling must be ordered with: an issue or pull request of a repository (they
 * share one numbering), or the whole repository (`number` absent: a barrier).
 */
export interface Scope {
  repo: string;
  number?: number;
}

/**
 * The scope of a delivery, or undefined when its handling needs no order: an event about an issue or
 * pull request is ordered with that one's; the state branch deleted (the fresh state holds dispatches)
 * with everything of the repository before and after it. Other pushes (each state commit is one; a
 * default-branch push only drops the cached config), workflow runs (each moves its own task, guarded
 * by its state) and installation events go their own way: as barriers they held up every issue of
 * the repository behind the slowest handler.
 */
export function scopeOf(name: string, payload: Record<string, unknown>): Scope | undefined {
  const repo = (payload.repository as { full_name?: string } | undefined)?.full_name?.toLowerCase();
  if (!repo) return undefined;
  const item = (payload.issue ?? payload.pull_request) as { number?: unknown } | undefined;
  if (typeof item?.number === "number") return { repo, number: item.number };
  const stateBranchDeleted =
    name === "push" && payload.deleted === true && payload.ref === `refs/heads/${DEFAULT_STATE_BRANCH}`;
  return stateBranchDeleted ? { repo } : undefined;
}

/** One repository's deliveries being handled, for the order below. */
interface RepoOrder {
  /** The last barrier (the state branch deleted): everything after it waits for it. */
  barrier: Promise<void>;
  /** The last delivery of each issue or pull request. */
  last: Map<number, Promise<void>>;
  /** Every delivery of the repository not finished yet. */
  pending: Set<Promise<void>>;
}

/**
 * Handling in arrival order where order matters, concurrently where it does not: a delivery about an
 * issue starts after the earlier ones about the same issue (a label, then its removal, a `/fleet
 * cancel` right after the label) and after the repository's earlier barriers; a barrier (the state
 * branch deleted) starts after every earlier delivery of the repository, and later ones after it.
 * Different issues never wait for each other, so a burst of labels shares its state commits (see
 * write-queue.ts).
 */
export class DeliveryOrder {
  private readonly repos = new Map<string, RepoOrder>();

  run(scope: Scope | undefined, handle: () => Promise<void>): Promise<void> {
    // Failures are the handler's to report (Probot logs them); nothing waits on this one.
    if (!scope)
      return Promise.resolve()
        .then(handle)
        .catch(() => {});
    let o = this.repos.get(scope.repo);
    if (!o) {
      o = { barrier: Promise.resolve(), last: new Map(), pending: new Set() };
      this.repos.set(scope.repo, o);
    }
    const { number } = scope;
    const before =
      number === undefined ? [o.barrier, ...o.pending] : [o.barrier, o.last.get(number) ?? Promise.resolve()];
    // Failures are the handler's to report (Probot logs them); the next delivery goes on regardless.
    const done = Promise.all(before)
      .then(handle)
      .catch(() => {});
    o.pending.add(done);
    if (number === undefined) o.barrier = done;
    else o.last.set(number, done);
    const order = o;
    void done.then(() => {
      order.pending.delete(done);
      if (number !== undefined && order.last.get(number) === done) order.last.delete(number);
      if (order.pending.size === 0 && this.repos.get(scope.repo) === order) this.repos.delete(scope.repo);
    });
    return done;
  }
}

/**
 * Stops taking deliveries and lets the answered ones finish, all within `withinMs` from now:
 * `server.close` stops the listener (and resolves when its connections are gone), `forceClose` drops
 * connections still open at the deadline. Resolves with how many deliveries were left unfinished.
 */
export async function stopAndDrain(
  deliveries: BackgroundDeliveries | undefined,
  server: { close: () => Promise<void>; forceClose?: () => void },
  withinMs: number,
): Promise<number> {
  const deadline = Date.now() + withinMs;
  const until = () => new Promise<void>((r) => setTimeout(r, Math.max(0, deadline - Date.now())).unref());
  let closed = false;
  const closing = server
    .close()
    .catch(() => {})
    .then(() => {
      closed = true;
    });
  await Promise.race([closing, until()]);
  if (!closed) server.forceClose?.();
  await Promise.race([deliveries?.idle(), until()]);
  return deliveries?.inFlight ?? 0;
}
