import type { IncomingMessage, ServerResponse } from "node:http";
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from "jose";
import type { Probot } from "probot";
import { isActive } from "../core/lifecycle.ts";
import type { Task } from "../core/task.ts";
import { isFleetDispatchOf } from "../core/task-workflow.ts";
import { githubAppOverOctokit } from "../github/octokit-port.ts";
import type { GitHub } from "../github/port.ts";
import type { RepoQueues } from "./repo-queues.ts";

/** Where a runner exchanges its job's OIDC token for a token of the Fleet app. */
export const ACTIONS_TOKEN_PATH = "/fleet/actions-token";

/** GitHub's OIDC issuer for Actions (GitHub Enterprise Server: `https://HOST/_services/token`). */
export const GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com";
/** The audience Fleet's action asks for, and the only one the app accepts. */
export const DEFAULT_OIDC_AUDIENCE = "fleet";

/**
 * What the task's run does with the token, and no more (the app itself may hold more: a token gets
 * only what is asked for, https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app):
 * - `contents`: push its `fleet/*` branch and commit to the `fleet/state` branch;
 * - `issues`: read the issue, comment, label, open issues for discovered work;
 * - `pull_requests`: open and update the task's PR, read its review comments;
 * - `actions`: dispatch the next queued task's workflow run, cancel a stopped one.
 * Left out on purpose: `workflows` (GitHub then refuses a push that adds or changes
 * `.github/workflows/*`, so the agent's branch cannot bring a workflow that runs with the
 * repository's secrets) and `administration`. `metadata: read` comes with any of them. App
 * permissions have no branch scope: `contents: write` reaches the default branch too, and only a
 * ruleset without the app in its bypass list keeps it off (README, "What a real installation needs").
 */
const RUN_PERMISSIONS = {
  contents: "write",
  issues: "write",
  pull_requests: "write",
  actions: "write",
} as const;

/**
 * The OIDC tokens already exchanged, by `jti` ("a unique identifier for the OIDC token",
 * https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect),
 * each kept until its `exp`, after which the signature check refuses the token anyway: memory holds
 * at most the tokens minted within one OIDC token lifetime. A `jti` is taken while its exchange runs
 * (a concurrent replay is refused too) and spent only once a token was minted for it; a refusal or a
 * failed mint gives it back, so the runner may try the same OIDC token again (after a 409 "run not
 * recorded yet", say). The memory is this process's: replicas of the app behind one URL each keep
 * their own, so one OIDC token could buy one token per replica (route a repository's exchanges to
 * one replica, or keep the set on the repository's state branch).
 */
export class SpentOidcTokens {
  /** jti -> exp (seconds since the epoch) of tokens a token was minted for. */
  private readonly spent = new Map<string, number>();
  /** jtis whose exchange is running now. */
  private readonly taking = new Set<string>();

  /** Takes `jti` for one exchange at `nowS`; false when it was spent or is being exchanged. */
  take(jti: string, nowS: number): boolean {
    for (const [id, exp] of this.spent) if (exp <= nowS) this.spent.delete(id);
    if (this.spent.has(jti) || this.taking.has(jti)) return false;
    this.taking.add(jti);
    return true;
  }

  /** A token was minted for `jti`: refused from now until `exp`. */
  spend(jti: string, exp: number): void {
    this.taking.delete(jti);
    this.spent.set(jti, exp);
  }

  /** No token was minted for `jti`: it may be exchanged again. */
  giveBack(jti: string): void {
    this.taking.delete(jti);
  }

  /** How many jtis are remembered (spent or being exchanged). */
  get size(): number {
    return this.spent.size + this.taking.size;
  }
}

export interface ActionsTokenOptions {
  /** The OIDC issuer whose tokens are accepted (the emulator's offline). */
  issuer: string;
  audience: string;
}

/** The claims of a GitHub Actions OIDC token that Fleet checks (see GitHub's "About security hardening with OpenID Connect"). */
interface ActionsClaims extends JWTPayload {
  repository?: string;
  repository_id?: string;
  run_id?: string;
  event_name?: string;
  workflow_ref?: string;
  /** Who started the run (Fleet's dispatches: the app's bot), and which attempt of it this job is. */
  actor?: string;
  run_attempt?: string;
}

class Refusal extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * `POST /fleet/actions-token` with `Authorization: Bearer <the job's OIDC token>` and `{"task_id"}`:
 * the runner of a task's Actions run gets a one-hour installation token of the Fleet app, for that
 * repository only, so the branch it pushes and the PR it opens are the app's (GitHub starts the
 * repository's workflows for those, and not for events made with the job's own GITHUB_TOKEN), and
 * no long-lived secret is stored in the repository.
 *
 * The token is given only when the OIDC token is GitHub's (signature, issuer, audience, expiry), it
 * comes from a `workflow_dispatch` run of the repository's Fleet workflow, and that run is the one
 * Fleet dispatched for this task, which is still live. The run's id is recorded just after the
 * dispatch; before it is (or when the process that dispatched died before recording it), the run itself
 * says whether Fleet dispatched it (isFleetDispatchOf: one GET of the run), and 409 asks the runner to
 * try again a little later only when it cannot tell. Each OIDC token buys one token at most
 * (`SpentOidcTokens`): a second exchange answers 401, not 409, since the credential itself is no
 * longer good (RFC 6750's `invalid_token`) and trying it again cannot succeed; the action asks the
 * job for a new OIDC token on each try.
 */
export function createActionsTokenHandler(
  app: Probot,
  queues: () => RepoQueues | undefined,
  options: ActionsTokenOptions,
  /** The app's slug: runs Fleet dispatched are its bot's (`<slug>[bot]`). */
  appSlug: () => Promise<string | undefined>,
) {
  const jwks = createRemoteJWKSet(new URL(`${options.issuer.replace(/\/$/, "")}/.well-known/jwks`));
  const spent = new SpentOidcTokens();

  async function exchange(req: IncomingMessage): Promise<{ token: string; expires_at: string }> {
    if (req.method !== "POST") throw new Refusal(405, `Use POST ${ACTIONS_TOKEN_PATH}.`);
    const bearer = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
    if (!bearer)
      throw new Refusal(
        401,
        "Send the job's OIDC token as `Authorization: Bearer <token>` (the job needs `permissions: id-token: write`).",
      );
    const taskId = await readTaskId(req);
    // One instant for the expiry check and the memory of spent tokens: a token is forgotten only
    // when the same clock refuses it as expired.
    const nowS = Math.floor(Date.now() / 1000);
    const claims = await verifiedClaims(bearer, jwks, options, nowS);
    const { jti, exp } = claims;
    if (!spent.take(jti, nowS))
      throw new Refusal(
        401,
        "This OIDC token has already been exchanged (or is being exchanged now): each is accepted once. Ask the job for a new one (core.getIDToken) and exchange that.",
      );
    try {
      const minted = await mintFor(claims, taskId);
      spent.spend(jti, exp);
      return minted;
    } catch (error) {
      spent.giveBack(jti);
      throw error;
    }
  }

  /** The checks on the run and its task, then the token: only the run Fleet dispatched for a live task gets one. */
  async function mintFor(
    claims: ActionsClaims,
    taskId: string,
  ): Promise<{ token: string; expires_at: string }> {
    const [owner, repo] = (claims.repository ?? "").split("/");
    if (!owner || !repo) throw new Refusal(401, "The OIDC token names no repository.");
    if (claims.event_name !== "workflow_dispatch")
      throw new Refusal(
        403,
        `Only a run Fleet dispatched gets a token (this one came from a ${claims.event_name} event).`,
      );

    const found = await queues()?.forInstalledRepo(owner, repo);
    if (!found) throw new Refusal(404, `The Fleet app is not installed on ${owner}/${repo}.`);
    const { queue, config, installationId, known, github } = found;
    // `<owner>/<repo>/.github/workflows/<file>@refs/...`: the file itself, not one whose name begins with it.
    const workflow = `${owner}/${repo}/.github/workflows/${config.workflow}@refs/`;
    if (!claims.workflow_ref?.startsWith(workflow))
      throw new Refusal(
        403,
        `Only Fleet's workflow (${config.workflow}) gets a token, not ${claims.workflow_ref}.`,
      );
    const task = (await queue.snapshot()).tasks[taskId];
    if (!task) throw new Refusal(404, `${owner}/${repo} has no task ${taskId}.`);
    if (!isActive(task.state))
      throw new Refusal(403, `Task ${taskId} is ${task.state}: it is not waiting for a run.`);
    if (task.runId === undefined) {
      const fleets = await dispatchedByFleet(github, { owner, repo }, task, claims, appSlug, (m) =>
        app.log.warn(m),
      );
      if (!fleets)
        throw new Refusal(409, `Task ${taskId}'s run is not recorded yet; try again in a few seconds.`);
    } else checkRecordedRun(task.runId, claims, taskId);

    // The run's repository only, by the id the OIDC token names (a repository renamed or recreated
    // under the same name is another one), with the run's permissions only:
    // https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app
    const repositoryId = Number(claims.repository_id);
    const mint = async (installation: number) =>
      githubAppOverOctokit(await app.auth()).createInstallationToken(installation, {
        ...(Number.isSafeInteger(repositoryId) && repositoryId > 0
          ? { repositoryIds: [repositoryId] }
          : { repositories: [repo] }),
        permissions: RUN_PERMISSIONS,
      });
    let minted: Awaited<ReturnType<typeof mint>>;
    try {
      minted = await mint(installationId);
    } catch (error) {
      // The installation the app knew may be gone (uninstalled, reinstalled): GitHub says which it is now.
      if (!known) throw error;
      const now = await queues()?.forInstalledRepo(owner, repo, { fresh: true });
      if (!now) throw new Refusal(404, `The Fleet app is not installed on ${owner}/${repo}.`);
      if (now.installationId === installationId) throw error;
      minted = await mint(now.installationId);
    }
    app.log.info(`actions token for ${owner}/${repo} run ${claims.run_id} (task ${taskId})`);
    return minted;
  }

  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    if ((req.url ?? "").split("?")[0] !== ACTIONS_TOKEN_PATH) return false;
    try {
      const body = JSON.stringify(await exchange(req));
      res.writeHead(201, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(body);
    } catch (error) {
      const status = error instanceof Refusal ? error.status : 500;
      if (!(error instanceof Refusal))
        app.log.error(`actions token exchange failed: ${(error as Error).message}`);
      const message =
        error instanceof Refusal ? error.message : "The Fleet app could not mint a token; see its log.";
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify({ message }));
    }
    return true;
  };
}

/**
 * The run asking is the first attempt of the run recorded for the task. A re-run from the Actions tab
 * is the same run id's next attempt (`run_attempt` in the OIDC token:
 * https://docs.github.com/en/actions/reference/security/oidc#oidc-token-claims), started by a person,
 * not by Fleet: a task runs again only through a new dispatch (`/fleet retry`).
 */
function checkRecordedRun(runId: string, claims: ActionsClaims, taskId: string): void {
  if (runId !== String(claims.run_id))
    throw new Refusal(403, `Task ${taskId} was dispatched as run ${runId}, not run ${claims.run_id}.`);
  if (claims.run_attempt !== "1")
    throw new Refusal(
      403,
      `Run ${claims.run_id} is attempt ${claims.run_attempt ?? "(none named)"}, a re-run: Fleet gives a token to the first attempt of the run it dispatched only. To run task ${taskId} again, comment \`/fleet retry\` on its issue.`,
    );
}

/** A dispatched task's run not recorded yet: whether the run says it is Fleet's dispatch of this attempt. */
async function dispatchedByFleet(
  github: GitHub,
  repo: { owner: string; repo: string },
  task: Task,
  claims: ActionsClaims,
  appSlug: () => Promise<string | undefined>,
  warn: (message: string) => void,
): Promise<boolean> {
  const id = Number(claims.run_id);
  if (task.state !== "dispatched" || !Number.isSafeInteger(id) || id <= 0) return false;
  const slug = await appSlug();
  if (!slug) return false;
  // The signed claims first (they cost no request): the run's first attempt, started by the app's bot.
  // A writer's dispatch by hand, or a re-run, is answered without asking GitHub about it.
  if (claims.actor?.toLowerCase() !== `${slug}[bot]`.toLowerCase() || claims.run_attempt !== "1")
    return false;
  try {
    return isFleetDispatchOf(task, await github.actions.getWorkflowRun(repo, id), slug);
  } catch (error) {
    warn(`could not read run ${id} of ${repo.owner}/${repo.repo}: ${(error as Error).message}`);
    return false;
  }
}

/** The OIDC token's claims once GitHub's signature, issuer, audience and expiry check out, with a `jti` and an `exp`. */
async function verifiedClaims(
  bearer: string,
  jwks: ReturnType<typeof createRemoteJWKSet>,
  options: ActionsTokenOptions,
  nowS: number,
): Promise<ActionsClaims & { jti: string; exp: number }> {
  let claims: ActionsClaims;
  try {
    ({ payload: claims } = await jwtVerify<ActionsClaims>(bearer, jwks, {
      issuer: options.issuer,
      audience: options.audience,
      algorithms: ["RS256"],
      currentDate: new Date(nowS * 1000),
    }));
  } catch (error) {
    throw new Refusal(401, `The OIDC token was not accepted: ${(error as Error).message}.`);
  }
  const { jti, exp } = claims;
  if (typeof jti !== "string" || jti === "")
    throw new Refusal(
      401,
      "The OIDC token has no `jti` claim: Fleet accepts each OIDC token once, by its jti (GitHub's tokens carry one), so it refuses tokens without one.",
    );
  if (typeof exp !== "number")
    throw new Refusal(
      401,
      "The OIDC token has no `exp` claim: Fleet remembers an exchanged token until it expires, so it refuses tokens that never do.",
    );
  return { ...claims, jti, exp };
}

/** `{"task_id": "..."}`, at most a few kilobytes. */
async function readTaskId(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 4096) throw new Refusal(413, "The request body is larger than a task id needs.");
    chunks.push(chunk as Buffer);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new Refusal(400, 'Send {"task_id": "<the task id>"} as JSON.');
  }
  const taskId = (body as { task_id?: unknown } | null)?.task_id;
  if (typeof taskId !== "string" || !/^[A-Za-z0-9._-]{1,64}$/.test(taskId))
    throw new Refusal(400, 'Send {"task_id": "<the task id>"} as JSON.');
  return taskId;
}
