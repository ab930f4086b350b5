import type { Context, Probot } from "probot";
import type { FleetConfig } from "../core/config.ts";
import { nextWakeAt } from "../core/scheduler.ts";
import { type FleetStateDoc, StateCorruptError } from "../core/state-doc.ts";
import { budgetHoldEndsAt } from "../economy/budgets.ts";
import { githubAppOverOctokit, githubOverOctokit } from "../github/octokit-port.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import type { ConfigCache } from "../queue/config-cache.ts";
import { createDashboardPublisher, type DashboardPublisher } from "../queue/dashboard.ts";
import type { Dispatcher } from "../queue/dispatcher.ts";
import { openRepository, type Repository } from "../queue/open-repository.ts";
import { reconcileRepo } from "../queue/reconcile.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { tasksOf } from "../queue/transitions.ts";
import { renderOverridesDropped, renderStateCorrupt } from "../render/notices.ts";
import type { StateTransport } from "../state/repo-store.ts";

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
  dispatcherFor?: (mode: FleetConfig["dispatch"], github: GitHub, repo: RepoRef) => Dispatcher;
}

/**
 * How old a cached config a reconcile sweep acts on may be. An event reads it again after 5 minutes
 * and a push to the default branch at once (config-cache.ts); a sweep, every 5 minutes in every
 * repository, would otherwise read it at nearly every sweep (a request per repository) for what no
 * push announces (an `_extends` source changed in another repository), which an hour still catches.
 */
const SWEEP_CONFIG_MAX_AGE_MS = 60 * 60_000;

/** An installation's Octokit, and GitHub over it. */
export interface InstallationClient {
  octokit: Awaited<ReturnType<Probot["auth"]>>;
  github: GitHub;
}

/** What the app keeps per repository between events. */
interface RepoHandle {
  repository: Repository;
  /** The installation the handle's client acts for. */
  installationId: number;
  /** The pinned dashboard issue, refreshed after every queue operation when `dashboard: true`. */
  dashboard: DashboardPublisher;
  /** A one-shot scheduling pass at the next moment one would decide something (see armWake). */
  wake?: { at: number; timer: ReturnType<typeof setTimeout> };
  /** The config the last operation ran with, for the wake-up pass. */
  fileConfig?: FleetConfig;
  /** When the last completed reconcile of this repository began: the next one lists only issues updated since. */
  lastSweepAt?: string;
}

const installationOf = (context: Context): number | undefined =>
  (context.payload as { installation?: { id: number } }).installation?.id;

/**
 * The app's repositories: one opened repository per installed repository (its state store with the
 * store's ETag cache, its tracker with the throttle windows, its dashboard), kept across events so that
 * consecutive events cost conditional reads, not full ones. They use an installation client from
 * `app.auth`, which renews its token by itself. Each repository also has a wake-up timer: rate limits,
 * retry backoffs, leases and budget holds run out without any webhook, and the timer runs the
 * scheduling pass at that moment, so nothing polls.
 */
export class RepoQueues {
  private readonly handles = new Map<string, Promise<RepoHandle>>();
  /** The installation each handle was opened for, known before the handle is. */
  private readonly handleInstallations = new Map<string, number>();
  private stopped = false;
  private reconcileTimer: ReturnType<typeof setInterval> | undefined;
  /** The timer's sweep under way: the next tick skips while it runs, and stop waits for it. */
  private sweep: Promise<void> | undefined;
  /** One client per installation, for its repositories' handles and its events (installationClient). */
  private readonly clients = new Map<number, Promise<InstallationClient>>();
  private readonly clock: () => Date;
  private readonly app: Probot;
  private readonly options: RepoQueueFactoryOptions;

  constructor(app: Probot, options: RepoQueueFactoryOptions = {}) {
    this.app = app;
    this.options = options;
    this.clock = options.clock ?? (() => new Date());
  }

  /**
   * The queue of a repository the app is installed on, for a request that comes without a webhook
   * (a runner's token exchange): undefined when the app is not installed there or its config is invalid.
   */
  async forInstalledRepo(
    owner: string,
    repo: string,
    opts: { fresh?: boolean } = {},
  ): Promise<
    | { queue: RepoQueue; config: FleetConfig; installationId: number; known: boolean; github: GitHub }
    | undefined
  > {
    // A repository the app already works on (an event came from it) has its installation known: a run's
    // token exchange, and each of its retries, costs no lookup. `fresh` asks GitHub again (the known
    // installation may be gone: a token minted on it fails, and the caller asks once more).
    const key = `${owner}/${repo}`.toLowerCase();
    const known = opts.fresh ? undefined : await this.handles.get(key)?.catch(() => undefined);
    const installationId =
      known?.installationId ??
      (await githubAppOverOctokit(await this.app.auth())
        .getRepoInstallation({ owner, repo })
        .then((installation) => installation.id)
        .catch(() => undefined));
    if (installationId === undefined) return undefined;
    const h = await this.handleFor(owner, repo, installationId);
    const loaded = await h.repository.fileConfig();
    if (!loaded.ok) return undefined;
    // The file's config: what a token exchange checks (the workflow) is file-only.
    const queue = this.queueFor(h, loaded.config, (m) => this.app.log.warn(m));
    return {
      queue,
      config: loaded.config,
      installationId,
      known: known !== undefined,
      github: h.repository.github,
    };
  }

  /**
   * The installation's client, made once for the process (`app.auth`, whose token renews itself): what
   * the installation's events and its repositories' handles act through. Probot makes an Octokit for
   * every delivery (~12 KB with its REST methods), which a burst of labels held by the thousand while
   * their state commits waited (README, the app's RSS).
   */
  installationClient(installationId: number): Promise<InstallationClient> {
    let client = this.clients.get(installationId);
    if (!client) {
      const made = this.app.auth(installationId).then((octokit) => ({
        octokit,
        github: githubOverOctokit(octokit),
      }));
      client = made;
      this.clients.set(installationId, made);
      made.catch(() => {
        if (this.clients.get(installationId) === made) this.clients.delete(installationId);
      });
    }
    return client;
  }

  /** The queue of the event's repository under `fileConfig`; notices of the event go to its issue. */
  async forContext(context: Context, fileConfig: FleetConfig): Promise<RepoQueue> {
    const { owner, repo } = context.repo();
    const installationId = installationOf(context);
    if (installationId === undefined)
      throw new Error("The webhook carries no installation; Fleet runs as an installed GitHub App.");
    const h = await this.handleFor(owner, repo, installationId);
    const payload = context.payload as { issue?: { number: number }; pull_request?: { number: number } };
    const issue = payload.issue?.number ?? payload.pull_request?.number;
    return this.queueFor(h, fileConfig, (m) => context.log.warn(m), issue);
  }

  /**
   * fleet/state was deleted: it starts over at once, holding dispatches until runs from before are
   * certainly over; the reconcile then finds the labeled issues again.
   */
  async stateBranchDeleted(context: Context, fileConfig: FleetConfig): Promise<void> {
    const { owner, repo } = context.repo();
    const installationId = installationOf(context);
    if (installationId === undefined) return;
    const h = await this.handleFor(owner, repo, installationId);
    await this.queueFor(h, fileConfig, (m) => context.log.warn(m)).holdAfterReset(
      this.options.stateResetHoldMs,
    );
  }

  /** The state cannot be read: the dashboard (when on) says so, with the remedy, until it can. */
  async showStateProblem(context: Context, fileConfig: FleetConfig, error: StateCorruptError): Promise<void> {
    const { owner, repo } = context.repo();
    const installationId = installationOf(context);
    if (installationId === undefined) return;
    const h = await this.handleFor(owner, repo, installationId);
    await h.dashboard.showProblem(fileConfig, renderStateCorrupt(error));
  }

  /**
   * Reconciles every repository the app is installed on (see reconcileRepo): a fresh process after
   * a crash has seen no event yet, and the labels it missed are what reconcile must find.
   */
  async reconcileKnown(knownCoders: readonly string[], log: (m: string) => void): Promise<void> {
    if (this.stopped) return;
    try {
      await this.discoverInstalledRepos();
    } catch (error) {
      log(`listing the app's installations failed: ${(error as Error).message}`);
    }
    for (const [key, pending] of this.handles) {
      if (this.stopped) return;
      const h = await pending.catch(() => undefined);
      if (h) await this.reconcileOne(key, h, knownCoders, log);
    }
  }

  /** Runs reconcileKnown every `periodMs` until stop: the safety net for missed webhooks and lapsed leases. */
  reconcileEvery(periodMs: number, knownCoders: readonly string[], log: (m: string) => void): void {
    clearInterval(this.reconcileTimer);
    this.reconcileTimer = setInterval(() => {
      this.sweep ??= this.reconcileKnown(knownCoders, log)
        .catch((error) => log(`the reconcile sweep failed: ${(error as Error).message}`))
        .finally(() => {
          this.sweep = undefined;
        });
    }, periodMs);
    this.reconcileTimer.unref();
  }

  /** Writes every repository's waiting comment edits; one repository's failure does not skip the others'. */
  async flush(): Promise<void> {
    const results = await Promise.allSettled(
      [...this.handles.values()].map(async (pending) => {
        const h = await pending;
        await h.repository.tracker.flush();
        await h.dashboard.flush();
      }),
    );
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  /** Disarms the wake-up timers and the reconcile sweep (the app is stopping). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.reconcileTimer);
    // It ends at the next repository (reconcileKnown checks stopped): nothing of it comes after stop.
    await this.sweep;
    for (const pending of this.handles.values()) await this.retire(pending);
  }

  private handleFor(owner: string, repo: string, installationId: number): Promise<RepoHandle> {
    const key = `${owner}/${repo}`.toLowerCase();
    let h = this.handles.get(key);
    if (h && this.handleInstallations.get(key) !== installationId) {
      // The app was installed on the repository again (uninstalled, then installed: a new installation
      // id). The handle's client acts for the installation that is gone, and GitHub refuses its tokens.
      const gone = this.handleInstallations.get(key);
      void this.retire(h);
      h = undefined;
      this.handleInstallations.delete(key);
      // Its client goes too once no repository's handle uses it (the clients are one per installation seen).
      if (gone !== undefined && ![...this.handleInstallations.values()].includes(gone))
        this.clients.delete(gone);
    }
    if (!h) {
      const opened = this.openHandle(owner, repo, installationId);
      h = opened;
      this.handles.set(key, opened);
      this.handleInstallations.set(key, installationId);
      opened.catch(() => {
        if (this.handles.get(key) !== opened) return;
        this.handles.delete(key);
        this.handleInstallations.delete(key);
      });
    }
    return h;
  }

  /** A handle no longer used: its wake-up timer and dashboard stop. */
  private async retire(pending: Promise<RepoHandle>): Promise<void> {
    const h = await pending.catch(() => undefined);
    if (!h) return;
    if (h.wake) clearTimeout(h.wake.timer);
    h.wake = undefined;
    h.dashboard.stop();
  }

  private async openHandle(owner: string, repo: string, installationId: number): Promise<RepoHandle> {
    const { options } = this;
    const { github } = await this.installationClient(installationId);
    const ref = { owner, repo };
    const repository = openRepository({
      github,
      repo: ref,
      transport: options.stateTransport,
      clock: options.clock,
      trackerIntervalMs: options.trackerIntervalMs,
      configs: options.configs,
      fleetUrl: options.publicUrl,
      ...(options.dispatcherFor
        ? { dispatcherFor: (config: FleetConfig) => options.dispatcherFor!(config.dispatch, github, ref) }
        : {}),
      log: (m) => this.app.log.warn(m),
    });
    const dashboard = createDashboardPublisher({
      github,
      repo: ref,
      store: repository.store,
      clock: options.clock,
      log: (m) => this.app.log.warn(m),
    });
    return { repository, dashboard, installationId };
  }

  private queueFor(
    h: RepoHandle,
    fileConfig: FleetConfig,
    log: (m: string) => void,
    issue?: number,
  ): RepoQueue {
    h.fileConfig = fileConfig;
    const { repo: ref, github } = h.repository;
    const since = this.clock();
    return h.repository.queue(fileConfig, {
      log,
      onState: (doc, config) => {
        this.armWake(h, doc, config, since);
        h.dashboard.update(doc, config);
      },
      // The app's copy of the file is current (a push to the default branch drops it): it may remove
      // overrides the file no longer allows, saying so where the event happened.
      onOverridesDropped: async (dropped) => {
        log(
          `${h.repository.full}: dropped config overrides ${dropped.map((d) => `${d.key} (${d.message})`).join("; ")}`,
        );
        if (issue === undefined) return;
        await github.issues
          .createComment(ref, issue, renderOverridesDropped(dropped))
          .catch((error) => log(`could not post the dropped-override notice: ${(error as Error).message}`));
      },
    });
  }

  /**
   * The next moment after `since` (when this queue's operations began) that a scheduling pass would
   * decide something without an event: a timer for it. A moment that passed while the operation was
   * still writing comments (after its own pass) counts, else a short retry backoff was never run.
   */
  private armWake(h: RepoHandle, doc: FleetStateDoc, config: FleetConfig, since: Date): void {
    if (this.stopped) return;
    // A rate limit, backoff or lease running out, a daily/monthly budget resetting, a state-reset hold ending.
    const at = [
      nextWakeAt(tasksOf(doc), config, since.toISOString()),
      budgetHoldEndsAt(config.budgets, doc.ledger, tasksOf(doc), since),
      doc.resetHold && Date.parse(doc.resetHold.until) > since.getTime() ? doc.resetHold.until : undefined,
    ]
      .filter((t): t is string => t !== undefined)
      .sort()[0];
    if (at === undefined) return;
    const due = Date.parse(at);
    if (h.wake && h.wake.at <= due) return;
    if (h.wake) clearTimeout(h.wake.timer);
    // A little after the moment, so the pass sees it as past; capped at setTimeout's limit.
    const delay = Math.min(Math.max(due - this.clock().getTime(), 0) + 250, 2 ** 31 - 1);
    const timer = setTimeout(() => {
      h.wake = undefined;
      if (h.fileConfig)
        void this.queueFor(h, h.fileConfig, (m) => this.app.log.warn(m))
          .schedule()
          // The pass is missed, not lost: the next event or reconcile runs it; the log says why.
          .catch((error) => this.app.log.error(`the wake-up pass failed: ${(error as Error).message}`));
    }, delay);
    timer.unref();
    h.wake = { at: due, timer };
  }

  /** A handle for every repository of every installation (the app's own token lists them). */
  private async discoverInstalledRepos(): Promise<void> {
    const installations = await githubAppOverOctokit(await this.app.auth()).listInstallations();
    for (const installation of installations) {
      const { github } = await this.installationClient(installation.id);
      const repos = await github.listInstallationRepositories();
      for (const r of repos)
        await this.handleFor(r.owner.login, r.name, installation.id).catch(() => undefined);
    }
  }

  private async reconcileOne(
    key: string,
    h: RepoHandle,
    knownCoders: readonly string[],
    log: (m: string) => void,
  ): Promise<void> {
    const { repository } = h;
    try {
      const config = await repository.fileConfig({ maxAgeMs: SWEEP_CONFIG_MAX_AGE_MS });
      if (!config.ok) return;
      // A minute early, for the clocks of this host and GitHub's to disagree a little.
      const startedAt = new Date(Date.now() - 60_000).toISOString().replace(/\.\d{3}Z$/, "Z");
      await reconcileRepo(
        this.queueFor(h, config.config, log),
        repository.github,
        repository.repo,
        knownCoders,
        {
          since: h.lastSweepAt,
        },
      );
      h.lastSweepAt = startedAt;
    } catch (error) {
      log(`reconcile of ${key} failed: ${(error as Error).message}`);
      if (!(error instanceof StateCorruptError)) return;
      const config = await repository.fileConfig().catch(() => undefined);
      if (config?.ok) await h.dashboard.showProblem(config.config, renderStateCorrupt(error));
    }
  }
}

/** The app's repositories (see RepoQueues). */
export function createRepoQueues(app: Probot, options: RepoQueueFactoryOptions = {}): RepoQueues {
  return new RepoQueues(app, options);
}
