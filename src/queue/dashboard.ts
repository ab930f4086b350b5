import type { FleetConfig } from "../core/config.ts";
import { credentialsState } from "../economy/credentials.ts";
import type { GitHubClient, RepoRef } from "../github/client.ts";
import {
  DASHBOARD_MARKER,
  DASHBOARD_TITLE,
  type DashboardCredential,
  dashboardContent,
  renderDashboard,
} from "../render/dashboard.ts";
import { hasMarker } from "../render/markers.ts";
import type { FleetStateDoc } from "../state/doc.ts";
import type { StateStore } from "../state/store.ts";

const DASHBOARD_KEY = "dashboard";

/** `doc.dashboard.issue`: the repository's dashboard issue, once one was created. */
export function dashboardIssueOf(doc: FleetStateDoc): number | undefined {
  const raw = doc[DASHBOARD_KEY] as { issue?: unknown } | undefined;
  return typeof raw?.issue === "number" ? raw.issue : undefined;
}

/** The dashboard's figures from the state document and the config. */
export function dashboardBody(repo: string, doc: FleetStateDoc, config: FleetConfig, now: Date): string {
  const cooling = credentialsState(doc);
  const coders = new Set(Object.values(doc.tasks).map((t) => t.coder));
  for (const c of Object.keys(cooling)) coders.add(c);
  const credentials: DashboardCredential[] = [];
  for (const [coder, c] of Object.entries(config.coders)) {
    // Every enabled coder's pool, and any other coder Fleet has tasks or cooling credentials for.
    if (!c.enabled && !coders.has(coder)) continue;
    for (const name of c.credentials) {
      const until = cooling[coder]?.[name]?.coolingUntil;
      credentials.push(until ? { coder, name, coolingUntil: until } : { coder, name });
    }
  }
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
  octokit: GitHubClient;
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

/**
 * The repository's one dashboard issue, kept current: created on first use and recorded in the
 * state, found again by its hidden marker if the state lost it, edited in place at most once per
 * `dashboard_interval_seconds`, pinned where GitHub allows. Two replicas creating it at once both
 * try to record theirs; the loser closes its own and edits the winner's.
 */
export function createDashboardPublisher(opts: DashboardPublisherOptions): DashboardPublisher {
  const clock = opts.clock ?? (() => new Date());
  const log = opts.log ?? (() => {});
  const full = `${opts.repo.owner}/${opts.repo.repo}`;
  let issue: number | undefined;
  let lastContent: string | undefined;
  let lastWrite = Number.NEGATIVE_INFINITY;
  let pending: { doc: FleetStateDoc; config: FleetConfig } | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let writing: Promise<void> = Promise.resolve();
  let edits = 0;
  let stopped = false;

  async function record(created: number): Promise<number> {
    let winner = created;
    await opts.store.update(({ doc }) => {
      const known = dashboardIssueOf(doc);
      if (known !== undefined) {
        winner = known;
        return null;
      }
      winner = created;
      return {
        doc: { ...doc, [DASHBOARD_KEY]: { issue: created } },
        message: `dashboard is issue #${created}`,
      };
    });
    return winner;
  }

  async function findByMarker(): Promise<number | undefined> {
    const open = await opts.octokit.paginate(opts.octokit.rest.issues.listForRepo, {
      ...opts.repo,
      state: "open",
      per_page: 100,
    });
    // Only a bot's issue counts, so a person quoting the marker cannot take the dashboard over.
    const mine = open
      .filter((i) => !i.pull_request && i.user?.type === "Bot" && hasMarker(i.body, DASHBOARD_MARKER))
      .sort((a, b) => a.number - b.number);
    return mine[0]?.number;
  }

  async function pin(number: number): Promise<void> {
    try {
      const { data } = await opts.octokit.rest.issues.get({ ...opts.repo, issue_number: number });
      await opts.octokit.request("POST /graphql", {
        query: "mutation($id: ID!) { pinIssue(input: { issueId: $id }) { issue { number } } }",
        variables: { id: data.node_id },
      });
    } catch (error) {
      // Pinning is a convenience: a repository at its pin limit, or a GitHub without it, still gets the issue.
      log(`could not pin the dashboard issue #${number} of ${full}: ${(error as Error).message}`);
    }
  }

  /** The dashboard issue's number: known, recorded in the state, found by marker, or created now. */
  async function ensureIssue(doc: FleetStateDoc, body: string): Promise<{ number: number; fresh: boolean }> {
    if (issue !== undefined) return { number: issue, fresh: false };
    const recorded = dashboardIssueOf(doc) ?? dashboardIssueOf((await opts.store.read()).doc);
    if (recorded !== undefined) return { number: recorded, fresh: false };
    const found = await findByMarker();
    if (found !== undefined) return { number: await record(found), fresh: false };
    const { data } = await opts.octokit.rest.issues.create({ ...opts.repo, title: DASHBOARD_TITLE, body });
    const winner = await record(data.number);
    if (winner !== data.number) {
      await opts.octokit.rest.issues.update({
        ...opts.repo,
        issue_number: data.number,
        state: "closed",
        state_reason: "not_planned",
        body: `${body.replace(DASHBOARD_MARKER, "")}\n\n_A duplicate of #${winner}, closed by Fleet._`,
      });
      return { number: winner, fresh: false };
    }
    await pin(data.number);
    return { number: data.number, fresh: true };
  }

  async function publish(doc: FleetStateDoc, config: FleetConfig): Promise<void> {
    const body = dashboardBody(full, doc, config, clock());
    const content = dashboardContent(body);
    if (content === lastContent) return;
    const target = await ensureIssue(doc, body);
    if (!target.fresh) {
      try {
        await opts.octokit.rest.issues.update({ ...opts.repo, issue_number: target.number, body });
      } catch (error) {
        issue = undefined;
        const status = (error as { status?: number }).status;
        // Deleted or transferred: forget it in the state too, so the next write finds or creates another.
        if (status === 404 || status === 410) {
          await opts.store.update(({ doc: d }) => {
            if (dashboardIssueOf(d) !== target.number) return null;
            const { [DASHBOARD_KEY]: _gone, ...rest } = d;
            return { doc: rest as FleetStateDoc, message: `dashboard issue #${target.number} is gone` };
          });
        }
        throw error;
      }
    }
    issue = target.number;
    lastContent = content;
    edits++;
  }

  function write(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const job = pending;
    pending = undefined;
    if (!job) return writing;
    lastWrite = Date.now();
    writing = writing
      .then(() => publish(job.doc, job.config))
      .catch((error) => log(`dashboard of ${full} not updated: ${(error as Error).message}`));
    return writing;
  }

  return {
    get edits() {
      return edits;
    },
    update(doc, config) {
      if (!config.dashboard || stopped) return;
      pending = { doc, config };
      const wait = lastWrite + config.dashboard_interval_seconds * 1000 - Date.now();
      if (wait <= 0) {
        void write();
        return;
      }
      if (!timer) {
        timer = setTimeout(() => void write(), wait);
        timer.unref?.();
      }
    },
    async flush() {
      await write();
    },
    async showProblem(config, text) {
      if (!config.dashboard || stopped) return;
      const run = async () => {
        const number = issue ?? (await findByMarker());
        if (number === undefined) return;
        const body = [DASHBOARD_MARKER, `# ${DASHBOARD_TITLE} for ${full}`, "", text].join("\n");
        await opts.octokit.rest.issues.update({ ...opts.repo, issue_number: number, body });
        issue = number;
        lastContent = undefined;
        edits++;
      };
      writing = writing
        .then(run)
        .catch((error) => log(`dashboard of ${full} not updated: ${(error as Error).message}`));
      await writing;
    },
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      pending = undefined;
    },
  };
}
