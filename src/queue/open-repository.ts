import type { FleetConfig } from "../core/config.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { type ConfigLoad, readFleetConfig } from "../github/read-config.ts";
import { createRepoStateStore, type StateTransport } from "../state/repo-store.ts";
import type { StateStore } from "../state/store.ts";
import { coalescingStore } from "../state/write-queue.ts";
import { createActionsDispatcher } from "./actions-dispatcher.ts";
import { type ConfigCache, createConfigCache } from "./config-cache.ts";
import { type Dispatcher, localDispatcher } from "./dispatcher.ts";
import { createRepoQueue, type RepoQueue, type RepoQueueDeps } from "./repo-queue.ts";
import { createTracker, type Tracker } from "./tracker.ts";

/**
 * One repository as every part of Fleet works with it (the app per installed repository, the action,
 * a `fleet run` worker, the CLI): its GitHub client, its `.github/fleet.yml` read through a cache, its
 * state through one write queue (transitions arriving together share one commit), its tracking
 * comments, and queues over that state.
 */
export interface Repository {
  readonly repo: RepoRef;
  /** "owner/name". */
  readonly full: string;
  readonly github: GitHub;
  readonly store: StateStore;
  readonly tracker: Tracker;
  /** `.github/fleet.yml` on the default branch, validated (cached until `forgetConfig` or the cache's time). */
  fileConfig(opts?: { maxAgeMs?: number }): Promise<ConfigLoad>;
  /** A push to the default branch may have changed the file: the next read asks GitHub again. */
  forgetConfig(): void;
  /** The queue for an operation under `fileConfig` (the file's settings; the state adds its overrides). */
  queue(
    fileConfig: FleetConfig,
    extra?: Pick<RepoQueueDeps, "log" | "onOverridesDropped" | "onState" | "taker">,
  ): RepoQueue;
}

export interface OpenRepositoryOptions {
  github: GitHub;
  repo: RepoRef;
  /** The state store; default: the `fleet/state` branch over `transport` (git unless FLEET_STATE_TRANSPORT says api). */
  store?: StateStore;
  transport?: StateTransport;
  /** Pacing between the store's writes; the write queue already serializes this process's (default 0). */
  pacing?: number;
  clock?: () => Date;
  /** Tracking-comment edits at most this often (tests: 0). */
  trackerIntervalMs?: number;
  /** Whether this repository's queues edit tracking comments (default true; see cli/target.ts for why not). */
  tracking?: boolean;
  /** Local mode (queue/local-github.ts): tracking comments name `fleet` commands, not `/fleet` ones. */
  local?: boolean;
  /** A cache shared between repositories (the app's, forgotten on pushes); default: this repository's own. */
  configs?: ConfigCache;
  /** How long an own cache keeps the file (default 5 minutes). */
  configTtlMs?: number;
  /** Reads the file some other way (local mode: the repository on disk). */
  loadConfig?: () => Promise<ConfigLoad>;
  /** The dispatcher for a dispatch mode; default: Actions for `actions` (with `fleetUrl`), else local. */
  dispatcherFor?: (config: FleetConfig) => Dispatcher;
  /** The Fleet app's URL as runners reach it, for dispatched runs to exchange their token at. */
  fleetUrl?: string;
  leaseTtlMs?: number;
  log?: (message: string) => void;
}

/** Opens a repository for Fleet's work (see Repository). */
export function openRepository(opts: OpenRepositoryOptions): Repository {
  const { github, repo } = opts;
  const full = `${repo.owner}/${repo.repo}`;
  const log = opts.log ?? (() => {});
  const inner =
    opts.store ??
    createRepoStateStore({
      github,
      owner: repo.owner,
      repo: repo.repo,
      transport: opts.transport,
      clock: opts.clock,
      pacing: opts.pacing ?? 0,
    });
  // Transitions arriving while a commit is being written share the next one; a lone one waits 10 ms.
  const store = coalescingStore(inner, { maxDelayMs: 10 });
  const tracker = createTracker({
    github,
    repo,
    minIntervalMs: opts.trackerIntervalMs,
    ...(opts.local ? { local: true } : {}),
  });
  const configs = opts.configs ?? createConfigCache({ ttlMs: opts.configTtlMs });
  const load = opts.loadConfig ?? (() => readFleetConfig(github, repo));
  const dispatcherFor =
    opts.dispatcherFor ??
    ((config: FleetConfig) =>
      config.dispatch === "actions"
        ? createActionsDispatcher({ github, repo, config, fleetUrl: opts.fleetUrl, log })
        : localDispatcher);
  return {
    repo,
    full,
    github,
    store,
    tracker,
    fileConfig: (opts) => configs.get(full, load, opts),
    forgetConfig: () => configs.forget(full),
    queue: (fileConfig, extra = {}) =>
      createRepoQueue({
        repo: full,
        store,
        fileConfig,
        dispatcher: dispatcherFor(fileConfig),
        ...(opts.tracking === false ? {} : { tracker }),
        clock: opts.clock,
        leaseTtlMs: opts.leaseTtlMs,
        log: extra.log ?? log,
        ...(extra.onOverridesDropped ? { onOverridesDropped: extra.onOverridesDropped } : {}),
        ...(extra.onState ? { onState: extra.onState } : {}),
        ...(extra.taker ? { taker: extra.taker } : {}),
      }),
  };
}
