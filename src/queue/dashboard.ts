import type { FleetConfig } from "../core/config.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import { credentialRows } from "../economy/credential-windows.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import {
  DASHBOARD_MARKER,
  DASHBOARD_TITLE,
  type DashboardCredential,
  dashboardContent,
  renderDashboard,
} from "../render/dashboard.ts";
import { hasMarker } from "../render/markers.ts";
import type { StateStore } from "../state/store.ts";

const DASHBOARD_KEY = "dashboard";

/** `doc.dashboard.issue`: the repository's dashboard issue, once one was created. */
export function dashboardIssueOf(doc: FleetStateDoc): number | undefined {
  const raw = doc[DASHBOARD_KEY] as { issue?: unknown } | undefined;
  return typeof raw?.issue === "number" ? raw.issue : undefined;
}

/** The dashboard's figures from the state document and the config. */
export function dashboardBody(repo: string, doc: FleetStateDoc, config: FleetConfig, now: Date): string {
  // Every enabled coder's pool, and any other coder Fleet has tasks or credential records for.
  const credentials: DashboardCredential[] = credentialRows(doc, config);
  return renderDashboard({
    repo,
    now: now.toISOString(),
    maxConcurrent: config.max_concurrent,
    tasks: Object.values(doc.tasks),
    credentials,
    ledger: doc.ledger,
  });
}

export interface DashboardPublisherOptions {
  github: GitHub;
  repo: RepoRef;
  /** The repository state: the dashboard's issue number is recorded there (compare-and-swap). */
  store: StateStore;
  clock?: () => Date;
  log?: (message: string) => void;
}

export interface DashboardPublisher {
  /** Shows this state now, or at the end of the throttle window (the latest state wins). */
  update(doc: FleetStateDoc, config: FleetConfig): void;
  /** Writes a state still waiting for its window, and waits for writes in flight. */
  flush(): Promise<void>;
  /** Drops a state still waiting for its window (the app is stopping); later updates are ignored. */
  stop(): void;
  /**
   * Shows a problem instead of the figures (the state cannot be read), on the dashboard issue Fleet
   * already has; none is created for it. The next good update replaces it.
   */
  showProblem(config: FleetConfig, text: string): Promise<void>;
  readonly edits: number;
}

/** The state recording `created` as the dashboard issue, unless one is recorded already (then: null, and that one wins). */
export function recordDashboardIssue(doc: FleetStateDoc, created: number) {
  if (dashboardIssueOf(doc) !== undefined) return null;
  return { doc: { ...doc, [DASHBOARD_KEY]: { issue: created } }, message: `dashboard is issue #${created}` };
}

/** The state forgetting dashboard issue `gone` (deleted or transferred), if it is still the recorded one. */
export function forgetDashboardIssue(doc: FleetStateDoc, gone: number) {
  if (dashboardIssueOf(doc) !== gone) return null;
  const { [DASHBOARD_KEY]: _gone, ...rest } = doc;
  return { doc: rest as FleetStateDoc, message: `dashboard issue #${gone} is gone` };
}

/**
 * The repository's one dashboard issue, kept current: created on first use and recorded in the
 * state, found again by its hidden marker if the state lost it, edited in place at most once per
 * `dashboard_interval_seconds`, pinned where GitHub allows. Two replicas creating it at once both
 * try to record theirs; the loser closes its own and edits the winner's.
 */
class Dashboard implements DashboardPublisher {
  edits = 0;
  private issue: number | undefined;
  private lastContent: string | undefined;
  private lastWrite = Number.NEGATIVE_INFINITY;
  private pending: { doc: FleetStateDoc; config: FleetConfig } | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private writing: Promise<void> = Promise.resolve();
  private stopped = false;
  private readonly clock: () => Date;
  private readonly log: (message: string) => void;
  private readonly full: string;
  private readonly opts: DashboardPublisherOptions;

  constructor(opts: DashboardPublisherOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? (() => new Date());
    this.log = opts.log ?? (() => {});
    this.full = `${opts.repo.owner}/${opts.repo.repo}`;
  }

  update(doc: FleetStateDoc, config: FleetConfig): void {
    if (!config.dashboard || this.stopped) return;
    this.pending = { doc, config };
    const wait = this.lastWrite + config.dashboard_interval_seconds * 1000 - Date.now();
    if (wait <= 0) {
      void this.write();
      return;
    }
    if (!this.timer) {
      this.timer = setTimeout(() => void this.write(), wait);
      this.timer.unref?.();
    }
  }

  async flush(): Promise<void> {
    await this.write();
  }

  async showProblem(config: FleetConfig, text: string): Promise<void> {
    if (!config.dashboard || this.stopped) return;
    const { github, repo } = this.opts;
    const run = async () => {
      const number = this.issue ?? (await this.findByMarker());
      if (number === undefined) return;
      const body = [DASHBOARD_MARKER, `# ${DASHBOARD_TITLE} for ${this.full}`, "", text].join("\n");
      await github.issues.update(repo, number, { body });
      this.issue = number;
      this.lastContent = undefined;
      this.edits++;
    };
    this.writing = this.writing
      .then(run)
      .catch((error) => this.log(`dashboard of ${this.full} not updated: ${(error as Error).message}`));
    await this.writing;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
  }

  private write(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const job = this.pending;
    this.pending = undefined;
    if (!job) return this.writing;
    this.lastWrite = Date.now();
    this.writing = this.writing
      .then(() => this.publish(job.doc, job.config))
      .catch((error) => this.log(`dashboard of ${this.full} not updated: ${(error as Error).message}`));
    return this.writing;
  }

  private async publish(doc: FleetStateDoc, config: FleetConfig): Promise<void> {
    const { github, repo, store } = this.opts;
    const body = dashboardBody(this.full, doc, config, this.clock());
    const content = dashboardContent(body);
    if (content === this.lastContent) return;
    const target = await this.ensureIssue(doc, body);
    if (!target.fresh) {
      try {
        await github.issues.update(repo, target.number, { body });
      } catch (error) {
        this.issue = undefined;
        const status = (error as { status?: number }).status;
        // Deleted or transferred: forget it in the state too, so the next write finds or creates another.
        if (status === 404 || status === 410)
          await store.update(({ doc: d }) => forgetDashboardIssue(d, target.number));
        throw error;
      }
    }
    this.issue = target.number;
    this.lastContent = content;
    this.edits++;
  }

  /** The dashboard issue's number: known, recorded in the state, found by marker, or created now. */
  private async ensureIssue(doc: FleetStateDoc, body: string): Promise<{ number: number; fresh: boolean }> {
    const { github, repo, store } = this.opts;
    if (this.issue !== undefined) return { number: this.issue, fresh: false };
    const recorded = dashboardIssueOf(doc) ?? dashboardIssueOf((await store.read()).doc);
    if (recorded !== undefined) return { number: recorded, fresh: false };
    const found = await this.findByMarker();
    if (found !== undefined) return { number: await this.record(found), fresh: false };
    const created = await github.issues.create(repo, { title: DASHBOARD_TITLE, body });
    const winner = await this.record(created.number);
    if (winner !== created.number) {
      await github.issues.update(repo, created.number, {
        state: "closed",
        state_reason: "not_planned",
        body: `${body.replace(DASHBOARD_MARKER, "")}\n\n_A duplicate of #${winner}, closed by Fleet._`,
      });
      return { number: winner, fresh: false };
    }
    await this.pin(created.number);
    return { number: created.number, fresh: true };
  }

  /** Records `created` in the state; the number already recorded by someone else wins. */
  private async record(created: number): Promise<number> {
    let winner = created;
    await this.opts.store.update(({ doc }) => {
      winner = dashboardIssueOf(doc) ?? created;
      return recordDashboardIssue(doc, created);
    });
    return winner;
  }

  private async findByMarker(): Promise<number | undefined> {
    const { github, repo } = this.opts;
    const open = await github.issues.listForRepo(repo, { state: "open" });
    // Only a bot's issue counts, so a person quoting the marker cannot take the dashboard over.
    const mine = open
      .filter((i) => !i.pull_request && i.user?.type === "Bot" && hasMarker(i.body, DASHBOARD_MARKER))
      .sort((a, b) => a.number - b.number);
    return mine[0]?.number;
  }

  private async pin(number: number): Promise<void> {
    const { github, repo } = this.opts;
    try {
      await github.issues.pin(repo, number);
    } catch (error) {
      // Pinning is a convenience: a repository at its pin limit, or a GitHub without it, still gets the issue.
      this.log(`could not pin the dashboard issue #${number} of ${this.full}: ${(error as Error).message}`);
    }
  }
}

/** The repository's dashboard issue, kept current (see Dashboard). */
export function createDashboardPublisher(opts: DashboardPublisherOptions): DashboardPublisher {
  return new Dashboard(opts);
}
