import type { ApplicationFunction, Context } from "probot";
import { CODER_NAMES } from "../core/coders.ts";
import { fleetLabelDefinitions } from "../core/labels.ts";
import { StateCorruptError } from "../core/state-doc.ts";
import { getAppIdentity } from "../github/app-identity.ts";
import { ensureFleetLabels } from "../github/labels.ts";
import { githubOverOctokit } from "../github/octokit-port.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { createConfigCache } from "../queue/config-cache.ts";
import { noticeMarker } from "../render/markers.ts";
import { renderStateCorrupt } from "../render/notices.ts";
import { DEFAULT_STATE_BRANCH } from "../state/github-store.ts";
import { stateTransportFrom } from "../state/repo-store.ts";
import {
  type ActionsTokenOptions,
  createActionsTokenHandler,
  DEFAULT_OIDC_AUDIENCE,
  GITHUB_OIDC_ISSUER,
} from "./actions-token.ts";
import type { AppDeps, HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";
import { onAnswer } from "./on-answer.ts";
import { onCommand } from "./on-command.ts";
import { onIssueEdited } from "./on-issue-edited.ts";
import { onIssueEnded } from "./on-issue-ended.ts";
import { onIssueLabeled } from "./on-issue-labeled.ts";
import { onMention } from "./on-mention.ts";
import { onPullRequestForReview } from "./on-pr-review.ts";
import { onPullRequest } from "./on-pull-request.ts";
import { onRebaseLabel } from "./on-rebase.ts";
import { onReview } from "./on-review.ts";
import { onSplitLabel } from "./on-split-label.ts";
import { onWorkflowRunCompleted } from "./on-workflow-run.ts";
import { createRepoQueues, type RepoQueueFactoryOptions, type RepoQueues } from "./repo-queues.ts";

export interface FleetAppOptions extends RepoQueueFactoryOptions {
  knownCoders?: readonly string[];
  /** Called with the app's per-repository queues (for a flush or a reconcile from outside). */
  onReady?: (queues: RepoQueues) => void;
  /** Period of the reconcile safety net (lease expiry, missed webhooks); 0 turns it off. Default 5 minutes. */
  reconcileMs?: number;
  /** Whose OIDC tokens runners may exchange (default GitHub's, `FLEET_OIDC_ISSUER`), for which audience. */
  actionsTokens?: Partial<ActionsTokenOptions>;
  /** The app's slug, its handle in `@<slug>` mentions; default FLEET_APP_SLUG, else GitHub's (`GET /app`, once). */
  appSlug?: string;
}

/** The OIDC issuer and audience from the options, else the environment, else GitHub's. */
function actionsTokenOptions(given: Partial<ActionsTokenOptions> = {}): ActionsTokenOptions {
  const ghe = process.env.GHE_HOST ? `https://${process.env.GHE_HOST}/_services/token` : undefined;
  return {
    issuer: given.issuer ?? process.env.FLEET_OIDC_ISSUER ?? ghe ?? GITHUB_OIDC_ISSUER,
    audience: given.audience ?? process.env.FLEET_OIDC_AUDIENCE ?? DEFAULT_OIDC_AUDIENCE,
  };
}

/**
 * The Probot application: wires webhook events to Fleet's handlers. Deliveries reach it through
 * Fleet's own intake (src/app/webhook-intake.ts, served by src/app/server.ts).
 */
export function createFleetApp(options: FleetAppOptions = {}): ApplicationFunction {
  // Read once, here, for every way the app is started: a bad FLEET_STATE_TRANSPORT stops the start-up
  // with the valid values, not every later event.
  const stateTransport = options.stateTransport ?? stateTransportFrom();
  return (app, { addHandler }) => {
    const configs = createConfigCache();
    const appHandle = appHandleOf(options.appSlug ?? process.env.FLEET_APP_SLUG, async () => {
      try {
        return (await getAppIdentity(await app.auth())).slug;
      } catch (error) {
        app.log.warn(
          `could not read the app's slug (GET /app), so @mentions are not answered yet (nor does a run whose dispatch is not recorded yet get its token before it is): ${(error as Error).message}`,
        );
        return undefined;
      }
    });
    const deps: AppDeps = {
      knownCoders: options.knownCoders ?? CODER_NAMES,
      queues: createRepoQueues(app, {
        ...options,
        stateTransport,
        publicUrl: options.publicUrl ?? process.env.FLEET_PUBLIC_URL,
        configs,
      }),
      configs,
      appHandle,
    };
    options.onReady?.(deps.queues);
    // Runners of dispatched tasks get the app's token here, in exchange for their job's OIDC token.
    addHandler(
      createActionsTokenHandler(
        app,
        () => deps.queues,
        actionsTokenOptions(options.actionsTokens),
        appHandle,
      ),
    );
    const period = options.reconcileMs ?? 5 * 60_000;
    if (period > 0) deps.queues.reconcileEvery(period, deps.knownCoders, (m) => app.log.warn(m));
    const { reportingCorruptState, human, steps, eventGitHub } = eventSteps(deps, app.log);
    // Each event is registered once (test/app/one-context-per-delivery.test.ts).
    app.on("issues.labeled", steps(human(onIssueLabeled), human(onSplitLabel), human(onRebaseLabel)));
    app.on("pull_request.labeled", steps(human(onRebaseLabel)));
    app.on("pull_request_review.submitted", steps(human(onReview)));
    app.on(["issues.unlabeled", "issues.closed"], steps(human(onIssueEnded)));
    // A plain reply from a maintainer on an issue whose agent asked a question is its answer.
    app.on("issue_comment.created", steps(human(onCommand), human(onMention), human(onAnswer)));
    // Edits by anyone, bots included: only a person who may drive Fleet moves the pinned prompt.
    app.on("issues.edited", steps(reportingCorruptState(onIssueEdited)));
    // PR events come from Fleet's own bot when it opens the PR: they are not filtered by sender. A merge
    // also moves the base (other Fleet PRs that now conflict get a rebase run) and may finish a split.
    // `review_on`: an agent review of a person's pull request as it opens or becomes ready.
    app.on(
      "pull_request.opened",
      steps(reportingCorruptState(onPullRequest), reportingCorruptState(onPullRequestForReview)),
    );
    app.on("pull_request.closed", steps(reportingCorruptState(onPullRequest)));
    app.on("pull_request.ready_for_review", steps(reportingCorruptState(onPullRequestForReview)));
    // Runs are started by Fleet's own bot, and their ends come from GitHub: not filtered by sender.
    app.on("workflow_run.completed", steps(reportingCorruptState(onWorkflowRunCompleted)));
    // A push to the default branch may change .github/fleet.yml: the next event reads it again.
    app.on("push", async (context) => {
      const { ref, repository } = context.payload;
      if (ref === `refs/heads/${repository.default_branch}`) deps.configs?.forget(repository.full_name);
      // Someone deleted the state branch (to start over) while runs may still be going.
      if (ref === `refs/heads/${DEFAULT_STATE_BRANCH}` && context.payload.deleted) {
        const loaded = await loadRepoConfig(await eventGitHub(context), context.repo(), deps.configs);
        if (loaded.ok) await deps.queues.stateBranchDeleted(context, loaded.config);
      }
    });
    app.on(["installation.created", "installation_repositories.added"], async (context) => {
      const repos =
        "repositories_added" in context.payload
          ? context.payload.repositories_added
          : (context.payload.repositories ?? []);
      const github = await eventGitHub(context);
      for (const r of repos) {
        const [owner, repo] = r.full_name.split("/") as [string, string];
        await ensureFleetLabels(github, { owner, repo }, fleetLabelDefinitions(deps.knownCoders));
      }
    });
  };
}

export default createFleetApp();

/** One step of an event's handling: a Fleet handler, given GitHub as the event's installation. */
type Step<C extends Context> = (context: C, deps: HandlerDeps) => Promise<void>;

/** The wrappers of Fleet's handlers, over what the app keeps across events. */
export function eventSteps(deps: AppDeps, log: Pick<Console, "error">) {
  /**
   * A step of an event's handling. A state document Fleet cannot read stops the step (nothing is
   * written over it), and the issue that triggered it (and the dashboard, when on) says what is wrong
   * and how to fix it.
   */
  const reportingCorruptState =
    <C extends Context>(handler: Step<C>) =>
    async (context: C, eventDeps: HandlerDeps) => {
      try {
        await handler(context, eventDeps);
      } catch (error) {
        if (!(error instanceof StateCorruptError)) throw error;
        await reportCorruptState(context, eventDeps, error).catch((e) =>
          log.error(`could not report the corrupt state: ${(e as Error).message}`),
        );
        log.error((error as Error).message);
      }
    };
  // Fleet's own actions (and other bots') never drive it: only people label, close and command.
  const human = <C extends Context>(handler: Step<C>) =>
    reportingCorruptState<C>(async (context, d) => {
      if (context.isBot) return;
      await handler(context, d);
    });
  /**
   * GitHub as the event's installation: the installation's one client, which the Context is given too,
   * so the Octokit Probot made for the delivery is not held while the event's steps wait (README, the
   * app's RSS). Its requests lose the `x-github-delivery` header Probot's per-delivery client adds
   * (undocumented, for GitHub Support: probot/lib/context.js). An event without an installation keeps
   * its own client.
   */
  const eventGitHub = async (context: Context): Promise<HandlerDeps["github"]> => {
    const installationId = (context.payload as { installation?: { id?: number } }).installation?.id;
    if (installationId === undefined) return githubOverOctokit(context.octokit);
    const client = await deps.queues.installationClient(installationId);
    context.octokit = client.octokit as Context["octokit"];
    return client.github;
  };
  /**
   * The one Probot handler of an event: its steps side by side, with GitHub as the event's
   * installation (eventGitHub). Probot makes a Context (an authenticated Octokit and a
   * logger) for every handler registered on an event (@octokit/webhooks runs its transform per
   * handler), and a burst of labels holds them all while each waits for its state commit: ~48 KB per
   * delivery with three handlers on `issues.labeled`, ~22 KB with one (README, the app's RSS). Each
   * step runs whatever another's fate.
   */
  const steps =
    <C extends Context>(...each: Array<Step<C>>) =>
    async (context: C) => {
      const eventDeps: HandlerDeps = { ...deps, github: await eventGitHub(context) };
      const failures: unknown[] = [];
      await Promise.all(each.map((step) => step(context, eventDeps).catch((e) => void failures.push(e))));
      if (failures.length === 0) return;
      // Each failure logged whole, as Probot logs a handler's (its error handler opens one level of
      // AggregateError, so a wrapped one would lose the inner ones' stacks): the others here, on the
      // event's logger, and the first by Probot.
      for (const e of failures.slice(1)) context.log.error(e as Error);
      throw failures[0];
    };
  return { reportingCorruptState, human, steps, eventGitHub };
}

/** The handle as given, else read once when first needed (a failed read is tried again at the next mention). */
function appHandleOf(given: string | undefined, read: () => Promise<string | undefined>) {
  let known: Promise<string | undefined> | undefined = given ? Promise.resolve(given) : undefined;
  return async () => {
    known ??= read();
    const handle = await known;
    if (!handle) known = undefined;
    return handle;
  };
}

/** The notice for an unreadable state document, on the event's issue or pull request and the dashboard. */
async function reportCorruptState(
  context: Context,
  deps: HandlerDeps,
  error: StateCorruptError,
): Promise<void> {
  const payload = context.payload as { issue?: { number: number }; pull_request?: { number: number } };
  const number = payload.issue?.number ?? payload.pull_request?.number;
  const body = renderStateCorrupt(error);
  if (number !== undefined) {
    // One notice per issue, edited when the problem changes: a burst of events is not a burst of comments.
    await upsertMarkedComment(
      deps.github,
      { ...context.repo(), issue_number: number },
      noticeMarker("state-corrupt"),
      body,
    );
  }
  const loaded = await loadRepoConfig(deps.github, context.repo(), deps.configs);
  if (loaded.ok) await deps.queues.showStateProblem(context, loaded.config, error);
}
