import type { Context, Probot } from "probot";
import type { FleetConfig } from "../core/config.ts";
import { nextWakeAt } from "../core/scheduler.ts";
import { budgetHoldEndsAt } from "../economy/budgets.ts";
import type { GitHubClient } from "../github/client.ts";
import { createActionsDispatcher } from "../queue/actions-dispatcher.ts";
import { createDashboardPublisher, type DashboardPublisher } from "../queue/dashboard.ts";
import type { Dispatcher } from "../queue/dispatcher.ts";
import { localDispatcher } from "../queue/dispatcher.ts";
import { reconcileRepo } from "../queue/reconcile.ts";
import { createRepoQueue, type RepoQueue } from "../queue/repo-queue.ts";
import { createTracker, type Tracker } from "../queue/tracker.ts";
import { tasksOf } from "../queue/transitions.ts";
import { renderOverridesDropped, renderStateCorrupt } from "../render/notices.ts";
import type { FleetStateDoc } from "../state/doc.ts";
import type { StateCorruptError } from "../state/errors.ts";
import { createRepoStateStore, type RepoStateStore, type StateTransport } from "../state/repo-store.ts";
import type { StateStore } from "../state/store.ts";
import { coalescingStore } from "../state/write-queue.ts";
import type { ConfigCache } from "../queue/config-cache.ts";
import { loadFleetConfig } from "./load-config.ts";

export interface RepoQueueFactoryOptions {
  clock?: () => Date;
  /** How the state branch is read and written; default `$FLEET_STATE_TRANSPORT`, else git (see repo-store.ts). */
  stateTransport?: StateTransport;
  trackerIntervalMs?: number;
  /** `.github/fleet.yml` per repository, shared with the webhook handlers (the reconcile reads it there too). */
  configs?: ConfigCache;
  /** How long dispatching waits after fleet/state is deleted (default: a worker's lease, 15 minutes). */
  stateResetHoldMs?: number;
  /**
   * The app's URL as runners reach it (`FLEET_PUBLIC_URL`): dispatched runs get it to exchange their
   * OIDC token for the app's token there (see actions-token.ts).
   */
  publicUrl?: string;
  /** Builds the dispatcher for a repository's dispatch mode; by default Actions for `actions`, else local. */
  dispatcherFor?: (
    mode: FleetConfig["dispatch"],
    octokit: GitHubClient,
    repo: { owner: string; repo: string },
  ) => Dispatcher;
}

interface RepoHandle {
  /** The pinned dashboard issue, refreshed after every queue operation when `dashboard: true`. */
  dashboard: DashboardPublisher;
  store: RepoStateStore;
  /** The store seen through a write queue: transitions arriving together share one commit. */
  coalesced: StateStore;
  tracker: Tracker;
  octokit: GitHubClient;
  /** A one-shot scheduling pass at the next moment one would decide something (see armWake). */
  wake?: { at: number; timer: ReturnType<typeof setTimeout> };
  /** The config the last operation ran with, for the wake-up pass. */
  fileConfig?: FleetConfig;
  /** When the last completed reconcile of this repository began: the next one lists only issues updated since. */
  lastSweepAt?: string;
}

/**
 * One state store (with its ETag cache) and one tracker (with its throttle windows) per repository,
 * kept across events so that consecutive events cost conditional reads, not full ones. They use an
 * installation client from `app.auth`, which renews its token by itself.
 */
export function createRepoQueues(app: Probot, options: RepoQueueFactoryOptions = {}) {
  const handles = new Map<string, Promise<RepoHandle>>();

  async function handleFor(owner: string, repo: string, installationId: number): Promise<RepoHandle> {
    const key = `${owner}/${repo}`.toLowerCase();
    let h = handles.get(key);
    if (!h) {
      h = (async () => {
        const octokit = (await app.auth(installationId)) as unknown as GitHubClient;
        // No pacing: this process's writes already go through one write queue (coalescingStore below).
        const store = createRepoStateStore({
          octokit,
          owner,
          repo,
          transport: options.stateTransport,
          clock: options.clock,
          pacing: 0,
        });
        const tracker = createTracker({
          octokit,
          repo: { owner, repo },
          minIntervalMs: options.trackerIntervalMs,
        });
        const coalesced = coalescingStore(store, { maxDelayMs: 50 });
        const dashboard = createDashboardPublisher({
          octokit,
          repo: { owner, repo },
          store: coalesced,
          clock: options.clock,
          log: (m) => app.log.warn(m),
        });
        return { store, coalesced, tracker, octokit, dashboard };
      })();
      handles.set(key, h);
      h.catch(() => handles.delete(key));
    }
    return h;
  }

  const clock = options.clock ?? (() => new Date());

  /**
   * Rate limits, retry backoffs and leases run out without any webhook: one timer per repository
   * fires a scheduling pass at the earliest such moment, so waiting tasks start on time and nothing polls.
   */
  let stopped = false;
  function armWake(owner: string, repo: string, h: RepoHandle, doc: FleetStateDoc, config: FleetConfig) {
    if (stopped) return;
    const now = clock();
    // A rate limit, backoff or lease running out, or a daily/monthly budget resetting under a held task.
    const at = [
      nextWakeAt(tasksOf(doc), config, now.toISOString()),
      budgetHoldEndsAt(config.budgets, doc.ledger, tasksOf(doc), now),
      doc.resetHold && Date.parse(doc.resetHold.until) > now.getTime() ? doc.resetHold.until : undefined,
    ]
      .filter((t): t is string => t !== undefined)
      .sort()[0];
    if (at === undefined) return;
    const due = Date.parse(at);
    if (h.wake && h.wake.at <= due) return;
    if (h.wake) clearTimeout(h.wake.timer);
    // A little after the moment, so the pass sees it as past; capped at setTimeout's limit.
    const delay = Math.min(Math.max(due - clock().getTime(), 0) + 250, 2 ** 31 - 1);
    const timer = setTimeout(() => {
      h.wake = undefined;
      const config = h.fileConfig;
      if (!config) return;
      queueFor(owner, repo, h, config, () => {})
        .schedule()
        .catch(() => {});
    }, delay);
    timer.unref();
    h.wake = { at: due, timer };
  }

  function queueFor(
    owner: string,
    repo: string,
    h: RepoHandle,
    fileConfig: FleetConfig,
    log: (m: string) => void,
    /** The issue the event is about: notices (an override dropped) go there. */
    issue?: number,
  ) {
    h.fileConfig = fileConfig;
    const dispatcher =
      options.dispatcherFor?.(fileConfig.dispatch, h.octokit, { owner, repo }) ??
      (fileConfig.dispatch === "actions"
        ? createActionsDispatcher({
            octokit: h.octokit,
            repo: { owner, repo },
            config: fileConfig,
            fleetUrl: options.publicUrl,
            log,
          })
        : localDispatcher);
    return createRepoQueue({
      repo: `${owner}/${repo}`,
      store: h.coalesced,
      fileConfig,
      dispatcher,
      tracker: h.tracker,
      clock: options.clock,
      log,
      onState: (doc, config) => {
        armWake(owner, repo, h, doc, config);
        h.dashboard.update(doc, config);
      },
      // The app's copy of the file is current (a push to the default branch drops it): it may remove
      // overrides the file no longer allows, saying so where the event happened.
      onOverridesDropped: async (dropped) => {
        log(
          `${owner}/${repo}: dropped config overrides ${dropped.map((d) => `${d.key} (${d.message})`).join("; ")}`,
        );
        if (issue === undefined) return;
        await h.octokit.rest.issues
          .createComment({ owner, repo, issue_number: issue, body: renderOverridesDropped(dropped) })
          .catch((error) => log(`could not post the dropped-override notice: ${(error as Error).message}`));
      },
    });
  }

  /** The file config as the webhook handlers read it: the same loader, through the same cache. */
  const fileConfigOf = (owner: string, repo: string, h: RepoHandle) => {
    const load = () => loadFleetConfig(h.octokit, { owner, repo });
    return options.configs ? options.configs.get(`${owner}/${repo}`, load) : load();
  };

  /** A handle for every repository of every installation (the app's own token lists them). */
  async function discoverInstalledRepos(): Promise<void> {
    const appOctokit = (await app.auth()) as unknown as GitHubClient;
    const installations = await appOctokit.paginate(appOctokit.rest.apps.listInstallations, {
      per_page: 100,
    });
    for (const installation of installations) {
      const octokit = (await app.auth(installation.id)) as unknown as GitHubClient;
      const repos = await octokit.paginate(octokit.rest.apps.listReposAccessibleToInstallation, {
        per_page: 100,
      });
      for (const r of repos) await handleFor(r.owner.login, r.name, installation.id).catch(() => undefined);
    }
  }

  return {
    /**
     * The queue of a repository the app is installed on, for a request that comes without a webhook
     * (a runner's token exchange): undefined when the app is not installed there or its config is invalid.
     */
    async forInstalledRepo(
      owner: string,
      repo: string,
    ): Promise<{ queue: RepoQueue; config: FleetConfig; installationId: number } | undefined> {
      const appOctokit = (await app.auth()) as unknown as GitHubClient;
      const installationId = await appOctokit.rest.apps
        .getRepoInstallation({ owner, repo })
        .then((r) => r.data.id)
        .catch(() => undefined);
      if (installationId === undefined) return undefined;
      const h = await handleFor(owner, repo, installationId);
      const loaded = await fileConfigOf(owner, repo, h);
      if (!loaded.ok) return undefined;
      // The file's config: what a token exchange checks (the workflow) is file-only.
      return {
        queue: queueFor(owner, repo, h, loaded.config, (m) => app.log.warn(m)),
        config: loaded.config,
        installationId,
      };
    },
    async forContext(context: Context, fileConfig: FleetConfig): Promise<RepoQueue> {
      const { owner, repo } = context.repo();
      const installationId = (context.payload as { installation?: { id: number } }).installation?.id;
      if (installationId === undefined)
        throw new Error("The webhook carries no installation; Fleet runs as an installed GitHub App.");
      const h = await handleFor(owner, repo, installationId);
      const payload = context.payload as { issue?: { number: number }; pull_request?: { number: number } };
      const issue = payload.issue?.number ?? payload.pull_request?.number;
      return queueFor(owner, repo, h, fileConfig, (m) => context.log.warn(m), issue);
    },
    /**
     * fleet/state was deleted: it starts over at once, holding dispatches until runs from before are
     * certainly over; the reconcile then finds the labeled issues again.
     */
    async stateBranchDeleted(context: Context, fileConfig: FleetConfig): Promise<void> {
      const { owner, repo } = context.repo();
      const installationId = (context.payload as { installation?: { id: number } }).installation?.id;
      if (installationId === undefined) return;
      const h = await handleFor(owner, repo, installationId);
      await queueFor(owner, repo, h, fileConfig, (m) => context.log.warn(m)).holdAfterReset(
        options.stateResetHoldMs,
      );
    },
    /** The state cannot be read: the dashboard (when on) says so, with the remedy, until it can. */
    async showStateProblem(
      context: Context,
      fileConfig: FleetConfig,
      error: StateCorruptError,
    ): Promise<void> {
      const { owner, repo } = context.repo();
      const installationId = (context.payload as { installation?: { id: number } }).installation?.id;
      if (installationId === undefined) return;
      const h = await handleFor(owner, repo, installationId);
      await h.dashboard.showProblem(fileConfig, renderStateCorrupt(error));
    },
    /**
     * Reconciles every repository the app is installed on (see reconcileRepo): a fresh process after
     * a crash has seen no event yet, and the labels it missed are what reconcile must find.
     */
    async reconcileKnown(knownCoders: readonly string[], log: (m: string) => void): Promise<void> {
      try {
        await discoverInstalledRepos();
      } catch (error) {
        log(`listing the app's installations failed: ${(error as Error).message}`);
      }
      for (const [key, pending] of handles) {
        try {
          const h = await pending;
          const [owner, repo] = key.split("/") as [string, string];
          const config = await fileConfigOf(owner, repo, h);
          if (!config.ok) continue;
          // A minute early, for the clocks of this host and GitHub's to disagree a little.
          const startedAt = new Date(Date.now() - 60_000).toISOString().replace(/\.\d{3}Z$/, "Z");
          await reconcileRepo(
            queueFor(owner, repo, h, config.config, log),
            h.octokit,
            { owner, repo },
            knownCoders,
            { since: h.lastSweepAt },
          );
          h.lastSweepAt = startedAt;
        } catch (error) {
          log(`reconcile of ${key} failed: ${(error as Error).message}`);
          if ((error as Error).name === "StateCorruptError") {
            const h = await pending.catch(() => undefined);
            const [owner, repo] = key.split("/") as [string, string];
            const config = h && (await fileConfigOf(owner, repo, h).catch(() => undefined));
            if (h && config?.ok)
              await h.dashboard.showProblem(config.config, renderStateCorrupt(error as StateCorruptError));
          }
        }
      }
    },
    async flush(): Promise<void> {
      for (const pending of handles.values()) {
        const h = await pending;
        await h.tracker.flush();
        await h.dashboard.flush();
      }
    },
    /** Disarms the wake-up timers (the app is stopping). */
    async stop(): Promise<void> {
      stopped = true;
      for (const pending of handles.values()) {
        const h = await pending.catch(() => undefined);
        if (h?.wake) clearTimeout(h.wake.timer);
        if (h) h.wake = undefined;
        h?.dashboard.stop();
      }
    },
  };
}

export type RepoQueues = ReturnType<typeof createRepoQueues>;
