import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Auth } from "./auth.ts";
import { type FaultSpec, Faults } from "./faults.ts";
import { createGitHttpHandler, type GitRequest, GitRequestLog, matchGitHttp } from "./git-http.ts";
import { GitRepo } from "./git-repo.ts";
import { APP_PERMISSIONS } from "./installation-token.ts";
import { OidcProvider } from "./oidc.ts";
import { loadSpec, sharedChecker } from "./openapi-check.ts";
import { Shapes } from "./payloads.ts";
import { makeRefMoved } from "./ref-events.ts";
import { type LoggedRequest, RequestLog } from "./request-log.ts";
import { Router } from "./router.ts";
import { Actions, type DispatchListener } from "./routes/actions.ts";
import { registerAppRoutes } from "./routes/app.ts";
import { registerCommitRoutes } from "./routes/commits.ts";
import { registerContentsRoutes } from "./routes/contents.ts";
import { registerGitRoutes } from "./routes/git.ts";
import { registerIssueRoutes } from "./routes/issues.ts";
import { registerPullRoutes } from "./routes/pulls.ts";
import { registerReactionRoutes } from "./routes/reactions.ts";
import { registerRepoRoutes } from "./routes/repos.ts";
import { registerReviewCommentRoutes } from "./routes/review-comments.ts";
import { createHandler } from "./server.ts";
import {
  type Actor,
  EmulatorState,
  nowIso,
  type Permission,
  type Repo,
  type TokenPermission,
  type WorkflowRun,
} from "./state.ts";
import { WebhookSender } from "./webhooks.ts";
import { DEFAULT_WORKFLOW_TOKEN_PERMISSIONS } from "./workflow-token.ts";
import { requestScope, World } from "./world.ts";

export type { FaultSpec } from "./faults.ts";
export type { GitRequest } from "./git-http.ts";
export {
  GIT_INFO_REFS_ROUTE,
  GIT_RECEIVE_PACK_ROUTE,
  GIT_ROUTES,
  GIT_UPLOAD_PACK_ROUTE,
} from "./git-http.ts";
export type { LoggedRequest } from "./request-log.ts";
export type { Permission, TokenPermission, WorkflowRun } from "./state.ts";
export { hasSkipInstruction } from "./workflow-triggers.ts";

export interface GitHubEmulatorOptions {
  port?: number;
  dataDir?: string;
  webhookSecret?: string;
  webhookUrl?: string;
  appId?: number;
  /** OpenAPI request validation; default true. */
  validate?: boolean;
  /** The app's slug; its bot user is `<slug>[bot]`. Default "fleet". */
  appSlug?: string;
  /** Primary rate limit per token per hour; default 5000 (GitHub's installation limit). */
  rateLimit?: number;
  /**
   * Enforce GitHub's content-creation secondary limits per token (GitHub: 80 a minute, 500 an
   * hour) with 403 + retry-after. Off by default so ordinary tests are not throttled.
   */
  contentLimits?: { perMinute?: number; perHour?: number };
}

export interface EmulatedIssue {
  number: number;
  title: string;
  body: string | null;
  state: "open" | "closed";
  stateReason: string | null;
  user: string;
  labels: string[];
  assignees: string[];
  isPullRequest: boolean;
  /** Pinned with GraphQL `pinIssue`. */
  pinned: boolean;
  subIssues: number[];
  parent?: number;
  comments: Array<{ id: number; body: string; user: { login: string; type: string } }>;
}

export interface RequestLogView {
  readonly entries: readonly LoggedRequest[];
  mark(): number;
  clear(): void;
}

/** A job's environment on a runner, as far as the emulator provides it (see `jobEnvironment`). */
// A type, not an interface, so it spreads into and passes as a `Record<string, string | undefined>` (process.env).
export type JobEnvironment = {
  /** The job's GITHUB_TOKEN (a workflow token for the run). */
  GITHUB_TOKEN: string;
  /** Present when the job may request an OIDC token (`permissions: id-token: write`). */
  ACTIONS_ID_TOKEN_REQUEST_URL?: string;
  /** Bearer token for `ACTIONS_ID_TOKEN_REQUEST_URL`; random per run. */
  ACTIONS_ID_TOKEN_REQUEST_TOKEN?: string;
};

export interface GitHubEmulator {
  url: string;
  /**
   * The Actions OIDC issuer, `${url}/_services/token` (GitHub Enterprise Server's form):
   * `/.well-known/openid-configuration` and `/.well-known/jwks` under it.
   */
  oidcIssuer: string;
  appId: number;
  appSlug: string;
  botLogin: string;
  privateKey: string;
  webhookSecret: string;
  dataDir: string;
  setWebhookUrl(url: string | undefined): void;
  createRepo(input: {
    owner: string;
    name: string;
    defaultBranch?: string;
    files?: Record<string, string>;
    private?: boolean;
  }): Promise<{
    fullName: string;
    cloneUrl: string;
    /** `http://127.0.0.1:<port>/<owner>/<repo>.git`: git smart HTTP, HTTP Basic with a token as password. */
    httpUrl: string;
    gitDir: string;
    installationId: number;
  }>;
  addCollaborator(fullName: string, login: string, permission: Permission): void;
  userToken(login: string): string;
  installationId(fullName: string): number;
  emitInstallation(fullName: string): void;
  issue(fullName: string, number: number): EmulatedIssue | undefined;
  comments(
    fullName: string,
    number: number,
  ): Array<{ id: number; body: string; user: { login: string; type: string } }>;
  pulls(fullName: string): Array<{
    number: number;
    head: string;
    base: string;
    state: string;
    merged: boolean;
    title: string;
    body: string;
  }>;
  deliveries(): Array<{
    id: string;
    event: string;
    action?: string;
    status: number | "pending" | "error" | "dropped";
    payload: unknown;
    redelivery: boolean;
    attempts: number;
  }>;
  redeliver(id: string): Promise<number>;
  waitForDeliveries(): Promise<void>;
  requests: RequestLogView;
  /** Git smart-HTTP requests (clone, fetch, push); not REST requests, so `counts()` leaves them out. */
  gitRequests: {
    readonly entries: readonly GitRequest[];
    mark(): number;
    clear(): void;
    counts(filter?: { since?: number }): { total: number; fetches: number; pushes: number };
  };
  counts(filter?: { since?: number }): {
    total: number;
    reads: number;
    writes: number;
    contentCreating: number;
    byRoute: Record<string, number>;
  };
  unimplemented(): Array<{ method: string; path: string; route: string; inSpec: boolean }>;
  faults: { inject(f: FaultSpec): void; clear(): void };
  /**
   * Every workflow run of the repository, oldest first: dispatched runs (`workflow_dispatch`) and
   * the runs pushes and pull requests start (`push`, `pull_request`; see README "CI runs").
   */
  workflowRuns(fullName: string): WorkflowRun[];
  /**
   * A token like a workflow job's GITHUB_TOKEN: it acts as `github-actions[bot]` (type Bot) on this
   * repository only, with `permissions` as a workflow's `permissions:` block writes them (default
   * contents, issues and pull-requests write). What it does starts no workflow run (except
   * workflow_dispatch), and it may not open pull requests unless the repository allows it.
   */
  workflowToken(
    fullName: string,
    opts?: { permissions?: Record<string, TokenPermission>; runId?: number },
  ): string;
  /**
   * What actions/upload-artifact does on a runner: zips `files` (path in the zip -> content) into an
   * artifact of the run. `retentionDays: 0` makes one that has already expired.
   */
  uploadArtifact(
    fullName: string,
    runId: number,
    name: string,
    files: Record<string, string | Uint8Array>,
    opts?: { retentionDays?: number },
  ): Promise<{ id: number; name: string; sizeInBytes: number }>;
  /** The repository's artifacts, oldest first. */
  artifacts(fullName: string): Array<{ id: number; name: string; runId: number; sizeInBytes: number }>;
  setWorkflowRunStatus(
    fullName: string,
    runId: number,
    status: "queued" | "in_progress" | "completed",
    conclusion?: string,
  ): Promise<void>;
  onWorkflowDispatch(listener: DispatchListener): void;
  /**
   * The environment a job of the run gets on a runner: its GITHUB_TOKEN (`workflowToken(full, { runId,
   * permissions })`) and, unless `idToken: false` (the workflow lacks `permissions: id-token: write`),
   * `ACTIONS_ID_TOKEN_REQUEST_URL` / `ACTIONS_ID_TOKEN_REQUEST_TOKEN`, which `core.getIDToken(audience)`
   * of @actions/core uses to fetch the job's OIDC token (signed by `oidcIssuer`'s key, with the run's
   * claims). The request token stops working once the run is completed.
   */
  jobEnvironment(
    fullName: string,
    runId: number,
    opts?: { idToken?: boolean; permissions?: Record<string, TokenPermission> },
  ): JobEnvironment;
  stop(): Promise<void>;
}

export async function startGitHubEmulator(opts: GitHubEmulatorOptions = {}): Promise<GitHubEmulator> {
  const [spec, checker] = await Promise.all([loadSpec(), sharedChecker()]);
  const ownDataDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), "fleet-gh-emulator-")));
  const appId = opts.appId ?? 1;
  const appSlug = opts.appSlug ?? "fleet";
  const botLogin = `${appSlug}[bot]`;
  const webhookSecret = opts.webhookSecret ?? "fleet-emulator-secret";

  const state = new EmulatorState();
  const auth = new Auth(appId, state, botLogin);
  state.user(botLogin, "Bot");
  const log = new RequestLog();
  const faults = new Faults();
  const router = new Router();
  const webhooks = new WebhookSender(webhookSecret, appId);
  webhooks.url = opts.webhookUrl;
  const unimplemented: Array<{ method: string; path: string; route: string; inSpec: boolean }> = [];

  let baseUrl = "";
  // Shapes need the URL, which exists only once the server listens; a getter-backed proxy keeps order simple.
  const shapes = new Shapes("", "", (login) => state.user(login));
  const world = new World(
    state,
    auth,
    shapes,
    webhooks,
    { id: appId, slug: appSlug, name: "Fleet", botLogin, owner: state.user("fleet-dev", "Organization") },
    (r) => pathToFileURL(r.git.gitDir).href,
  );
  const refMoved = makeRefMoved(world);
  /** A `git push` updated refs: `lines` are post-receive's "<before> <after> <ref>" lines. */
  const reportPush = async (repo: Repo, lines: string, login: string | undefined): Promise<void> => {
    const pusher = login ? state.user(login) : repo.owner;
    for (const line of lines.split("\n").filter(Boolean)) {
      const [before, after, ref] = line.trim().split(" ");
      const zero = "0".repeat(40);
      await refMoved(repo, ref!, before === zero ? null : before!, after === zero ? null : after!, pusher);
    }
  };
  const actions = new Actions(world);
  const oidc = new OidcProvider(state, () => baseUrl);

  registerAppRoutes(router, world);
  registerRepoRoutes(router, world, (ctx) => {
    const [, b] = handler.bucketFor(ctx.actor, "");
    const h = handler.rateHeaders(b);
    const core = {
      limit: Number(h["x-ratelimit-limit"]),
      used: Number(h["x-ratelimit-used"]),
      remaining: Number(h["x-ratelimit-remaining"]),
      reset: Number(h["x-ratelimit-reset"]),
    };
    return {
      resources: { core, search: { ...core, limit: 30, used: 0, remaining: 30 }, graphql: core },
      rate: core,
    };
  });
  registerIssueRoutes(router, world);
  registerGitRoutes(router, world, (r, ref, b, a) => refMoved(r, ref, b, a));
  registerContentsRoutes(router, world, (r, ref, b, a) => refMoved(r, ref, b, a));
  registerPullRoutes(router, world, (r, ref, b, a) => refMoved(r, ref, b, a));
  registerReviewCommentRoutes(router, world);
  actions.register(router);
  registerCommitRoutes(router, world);
  registerReactionRoutes(router, world);

  const handler = createHandler({
    spec,
    checker,
    router,
    world,
    log,
    faults,
    validate: opts.validate ?? true,
    rateLimit: opts.rateLimit ?? 5000,
    contentLimits: opts.contentLimits,
    baseUrl: () => baseUrl,
    unimplemented,
    // Reports from the bare repositories' post-receive hooks: a `git push` happened.
    internal: async (path, body) => {
      const m = /^\/_emulator\/push\/(.+)$/.exec(path);
      if (!m) return undefined;
      const repo = state.repos.get(decodeURIComponent(m[1]!).toLowerCase());
      if (!repo) return { status: 404, body: { message: "no such repository" } };
      const { lines, login } = JSON.parse(body.toString("utf8")) as { lines: string; login?: string };
      await reportPush(repo, lines, login);
      return { status: 200, body: { ok: true } };
    },
  });

  const gitLog = new GitRequestLog();
  const gitHttp = createGitHttpHandler({
    state,
    auth,
    dataDir,
    log: gitLog,
    faults,
    // Reported as the token's actor, so a GITHUB_TOKEN's push starts no workflow run.
    onPush: (repo, lines, actor: Actor) =>
      requestScope.run({ actor, dropDeliveries: false }, () =>
        reportPush(
          repo,
          lines,
          actor.kind === "user" || actor.kind === "installation" ? actor.user.login : undefined,
        ),
      ),
  });

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://emulator.invalid");
    // The Actions OIDC provider (discovery, keys, a job's ID token) is not part of the REST API.
    const oidcReply = oidc.handle(req.method ?? "GET", url, req.headers.authorization);
    if (oidcReply) {
      req.resume();
      res.writeHead(oidcReply.status, oidcReply.headers);
      res.end(req.method === "HEAD" ? undefined : JSON.stringify(oidcReply.body));
      return;
    }
    const git = matchGitHttp(url.pathname);
    // Signed artifact download URLs need no credentials (GitHub serves them from blob storage).
    const blob = req.method === "GET" ? actions.download(url.pathname) : undefined;
    if (blob) {
      req.resume();
      res.writeHead(blob.status, blob.headers);
      res.end(blob.body);
      return;
    }
    // Git smart HTTP shares the API's port, as on github.com, but not its pipeline (no JSON, no REST limits).
    const work = git ? gitHttp(req, res, git, url.searchParams) : handler.handle(req, res);
    work.catch((e) => {
      process.stderr.write(`[github-emulator] ${e?.stack ?? e}\n`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  // Longer than clients' idle timeouts, so a client never reuses a socket the server is closing.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, "127.0.0.1", () => resolve());
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  (shapes as { api: string }).api = baseUrl;
  (shapes as { html: string }).html = baseUrl;

  const mustRepo = (fullName: string): Repo => {
    const r = state.repos.get(fullName.toLowerCase());
    if (!r) throw new Error(`the emulator has no repository ${fullName}`);
    return r;
  };

  const installPushHook = async (repo: Repo) => {
    // The hook reports pushes back to the emulator; FLEET_EMULATOR_LOGIN in the pusher's
    // environment names who pushed (default: the repository owner).
    // Pushes over HTTP hand their lines to the emulator through a file instead (no node start-up per push).
    const script = `#!/bin/sh
if [ -n "$FLEET_EMULATOR_PUSH_FILE" ]; then cat > "$FLEET_EMULATOR_PUSH_FILE"; exit 0; fi
input=$(cat)
FLEET_HOOK_INPUT="$input" exec node -e '
const body = JSON.stringify({ lines: process.env.FLEET_HOOK_INPUT || "", login: process.env.FLEET_EMULATOR_LOGIN || undefined });
fetch(${JSON.stringify(`${baseUrl}/_emulator/push/${encodeURIComponent(repo.fullName)}`)}, { method: "POST", body, headers: { "content-type": "application/json" } })
  .then((r) => r.arrayBuffer()).catch(() => {});
'
`;
    const hook = join(repo.git.gitDir, "hooks", "post-receive");
    await writeFile(hook, script);
    await chmod(hook, 0o755);
  };

  const emulator: GitHubEmulator = {
    url: baseUrl,
    oidcIssuer: oidc.issuer,
    appId,
    appSlug,
    botLogin,
    privateKey: auth.privateKey,
    webhookSecret,
    dataDir,
    setWebhookUrl(url) {
      webhooks.url = url;
    },
    async createRepo(input) {
      const fullName = `${input.owner}/${input.name}`;
      if (state.repos.has(fullName.toLowerCase())) throw new Error(`repository ${fullName} already exists`);
      const defaultBranch = input.defaultBranch ?? "main";
      const git = await GitRepo.init(join(dataDir, input.owner, `${input.name}.git`), defaultBranch);
      const owner = state.user(input.owner);
      let installation = [...state.installations.values()].find((i) => i.account.id === owner.id);
      if (!installation) {
        installation = { id: state.nextId(), account: owner, repos: new Set(), createdAt: nowIso() };
        state.installations.set(installation.id, installation);
      }
      installation.repos.add(fullName);
      const now = nowIso();
      const repo: Repo = {
        id: state.nextId(),
        owner,
        name: input.name,
        fullName,
        defaultBranch,
        private: input.private ?? false,
        git,
        installationId: installation.id,
        labels: new Map(),
        issues: new Map(),
        nextNumber: 1,
        collaborators: new Map(),
        runs: [],
        workflowIds: new Map(),
        artifacts: [],
        // A new repository's defaults: a read-only GITHUB_TOKEN, and Actions may not create or
        // approve pull requests (https://docs.github.com/en/repositories/managing-your-repositorys-settings-and-features/enabling-features-for-your-repository/managing-github-actions-settings-for-a-repository#preventing-github-actions-from-creating-or-approving-pull-requests).
        actionsSettings: { defaultWorkflowPermissions: "read", canApprovePullRequestReviews: false },
        createdAt: now,
        pushedAt: now,
      };
      const files = Object.entries(input.files ?? {});
      if (files.length > 0) {
        const changes = [];
        for (const [path, content] of files)
          changes.push({ path, mode: "100644", sha: await git.writeBlob(content) });
        const tree = await git.buildTree(undefined, changes);
        const sha = await git.commitTree({
          tree,
          parents: [],
          message: "Initial commit",
          author: { name: owner.login, email: `${owner.id}+${owner.login}@users.noreply.github.com` },
        });
        await git.updateRef(`refs/heads/${defaultBranch}`, sha, "");
      }
      await installPushHook(repo);
      state.repos.set(fullName.toLowerCase(), repo);
      return {
        fullName,
        cloneUrl: pathToFileURL(git.gitDir).href,
        httpUrl: `${baseUrl}/${input.owner}/${input.name}.git`,
        gitDir: git.gitDir,
        installationId: installation.id,
      };
    },
    addCollaborator(fullName, login, permission) {
      const repo = mustRepo(fullName);
      state.user(login);
      repo.collaborators.set(login.toLowerCase(), permission);
    },
    userToken: (login) => auth.userToken(login),
    installationId: (fullName) => mustRepo(fullName).installationId,
    emitInstallation(fullName) {
      const repo = mustRepo(fullName);
      const inst = state.installations.get(repo.installationId)!;
      const payload = {
        action: "created",
        installation: {
          id: inst.id,
          account: shapes.user(inst.account),
          repository_selection: "selected",
          access_tokens_url: `${baseUrl}/app/installations/${inst.id}/access_tokens`,
          repositories_url: `${baseUrl}/installation/repositories`,
          html_url: `${baseUrl}/settings/installations/${inst.id}`,
          app_id: appId,
          app_slug: appSlug,
          target_id: inst.account.id,
          target_type: "User",
          permissions: { ...APP_PERMISSIONS },
          events: ["issues", "issue_comment", "pull_request", "push", "workflow_run"],
          created_at: Math.floor(Date.parse(inst.createdAt) / 1000),
          updated_at: Math.floor(Date.parse(inst.createdAt) / 1000),
          single_file_name: null,
          has_multiple_single_files: false,
          single_file_paths: [],
          suspended_by: null,
          suspended_at: null,
        },
        repositories: [...inst.repos].map((n) => {
          const r = state.repos.get(n.toLowerCase())!;
          return {
            id: r.id,
            node_id: shapes.nodeId("Repository", r.id),
            name: r.name,
            full_name: r.fullName,
            private: r.private,
          };
        }),
        sender: shapes.user(inst.account),
      };
      webhooks.enqueue(`installation:${inst.id}`, "installation", payload);
    },
    issue(fullName, number) {
      const repo = state.repos.get(fullName.toLowerCase());
      const i = repo?.issues.get(number);
      if (!i) return undefined;
      return {
        number: i.number,
        title: i.title,
        body: i.body,
        state: i.state,
        stateReason: i.stateReason,
        user: i.user.login,
        labels: [...i.labels],
        assignees: [...i.assignees],
        isPullRequest: !!i.pull,
        pinned: i.pinned === true,
        subIssues: i.subIssues.map((id) => state.issuesById.get(id)?.issue.number ?? -1),
        parent: i.parent !== undefined ? state.issuesById.get(i.parent)?.issue.number : undefined,
        comments: i.comments.map((c) => ({
          id: c.id,
          body: c.body,
          user: { login: c.user.login, type: c.user.type },
        })),
      };
    },
    comments(fullName, number) {
      return emulator.issue(fullName, number)?.comments ?? [];
    },
    pulls(fullName) {
      const repo = mustRepo(fullName);
      return [...repo.issues.values()]
        .filter((i) => i.pull)
        .map((i) => ({
          number: i.number,
          head: i.pull!.headRef,
          base: i.pull!.baseRef,
          state: i.state,
          merged: i.pull!.merged,
          title: i.title,
          body: i.body ?? "",
        }));
    },
    deliveries: () =>
      webhooks.deliveries().map((d) => ({
        id: d.id,
        event: d.event,
        action: d.action,
        status: d.status,
        payload: d.payload,
        redelivery: d.redelivery,
        attempts: d.attempts,
      })),
    redeliver: (id) => webhooks.redeliver(id),
    waitForDeliveries: () => webhooks.waitForIdle(),
    requests: log,
    gitRequests: gitLog,
    counts: (filter) => log.counts(filter),
    unimplemented: () => [...unimplemented],
    faults: { inject: (f) => faults.inject(f), clear: () => faults.clear() },
    workflowRuns: (fullName) => mustRepo(fullName).runs.map((r) => ({ ...r })),
    async setWorkflowRunStatus(fullName, runId, status, conclusion) {
      const repo = mustRepo(fullName);
      const run = repo.runs.find((r) => r.id === runId);
      if (!run) throw new Error(`no workflow run ${runId} in ${fullName}`);
      await actions.setStatus(repo, run, status, conclusion);
    },
    onWorkflowDispatch(listener) {
      actions.listeners.push(listener);
    },
    workflowToken(fullName, opts = {}) {
      const repo = mustRepo(fullName);
      return auth.workflowToken(repo.installationId, {
        repo: repo.fullName,
        permissions: { ...(opts.permissions ?? DEFAULT_WORKFLOW_TOKEN_PERMISSIONS) },
        runId: opts.runId,
      });
    },
    jobEnvironment(fullName, runId, opts = {}) {
      const repo = mustRepo(fullName);
      const run = repo.runs.find((r) => r.id === runId);
      if (!run) throw new Error(`no workflow run ${runId} in ${fullName}`);
      const env: JobEnvironment = {
        GITHUB_TOKEN: emulator.workflowToken(fullName, { runId, permissions: opts.permissions }),
      };
      if (opts.idToken !== false) {
        const { url, token } = oidc.requestFor(run);
        env.ACTIONS_ID_TOKEN_REQUEST_URL = url;
        env.ACTIONS_ID_TOKEN_REQUEST_TOKEN = token;
      }
      return env;
    },
    async uploadArtifact(fullName, runId, name, files, opts = {}) {
      const repo = mustRepo(fullName);
      const run = repo.runs.find((r) => r.id === runId);
      if (!run) throw new Error(`no workflow run ${runId} in ${fullName}`);
      const a = await actions.uploadArtifact(repo, run, name, files, opts.retentionDays);
      return { id: a.id, name: a.name, sizeInBytes: a.zip.length };
    },
    artifacts: (fullName) =>
      mustRepo(fullName).artifacts.map((a) => ({
        id: a.id,
        name: a.name,
        runId: a.runId,
        sizeInBytes: a.zip.length,
      })),
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await webhooks.waitForIdle();
      if (ownDataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
  return emulator;
}
