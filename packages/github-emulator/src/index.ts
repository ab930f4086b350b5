import { mkdtemp } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Actions } from "./actions.ts";
import type { GitHubEmulator, GitHubEmulatorOptions } from "./api.ts";
import { ArtifactStore } from "./artifact-store.ts";
import { Auth } from "./auth.ts";
import { emulatorMethods } from "./emulator-methods.ts";
import { Faults } from "./faults.ts";
import { createGitHttpHandler, GitRequestLog } from "./git-http.ts";
import { listen } from "./http-server.ts";
import { OidcProvider } from "./oidc.ts";
import { loadSpec, sharedChecker } from "./openapi-check.ts";
import { Shapes } from "./payloads.ts";
import { RateLimits } from "./rate-limits.ts";
import { makeRefMoved } from "./ref-events.ts";
import { RequestLog } from "./request-log.ts";
import { Router } from "./router.ts";
import { registerRoutes } from "./routes/index.ts";
import { createHandler } from "./server.ts";
import { type Actor, EmulatorState, type Repo } from "./state.ts";
import { WebhookSender } from "./webhooks.ts";
import { requestScope, World } from "./world.ts";

export type {
  EmulatedIssue,
  GitHubEmulator,
  GitHubEmulatorOptions,
  JobEnvironment,
  RequestLogView,
} from "./api.ts";
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

/** The emulator on a port of its own (0: any free one), with a fresh data directory unless given one. */
export async function startGitHubEmulator(opts: GitHubEmulatorOptions = {}): Promise<GitHubEmulator> {
  const [spec, checker] = await Promise.all([loadSpec(), sharedChecker()]);
  const ownDataDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), "gh-emulator-")));
  const webhookSecret = opts.webhookSecret ?? "gh-emulator-secret";
  const world = createWorld(opts, webhookSecret);
  const { state, auth } = world;
  let baseUrl = "";
  const refMoved = makeRefMoved(world);
  /** A `git push` updated refs: `lines` are post-receive's "<before> <after> <ref>" lines. */
  const reportPush = async (repo: Repo, lines: string, login: string | undefined): Promise<void> => {
    const pusher = login ? state.user(login) : repo.owner;
    const zero = "0".repeat(40);
    for (const line of lines.split("\n").filter(Boolean)) {
      const [before, after, ref] = line.trim().split(" ");
      await refMoved(repo, ref!, before === zero ? null : before!, after === zero ? null : after!, pusher);
    }
  };
  const actions = new Actions(world);
  const artifacts = new ArtifactStore(() => state.nextId());
  const oidc = new OidcProvider(state, () => baseUrl);
  const limits = new RateLimits(opts.rateLimit ?? 5000, opts.contentLimits, opts.concurrentRequests ?? 100);
  const router = new Router();
  registerRoutes(router, world, {
    actions,
    artifacts,
    limits,
    onRefMoved: (r, ref, b, a) => refMoved(r, ref, b, a),
  });

  const log = new RequestLog();
  const faults = new Faults();
  const unimplemented: Array<{ method: string; path: string; route: string; inSpec: boolean }> = [];
  const rest = createHandler({
    spec,
    checker,
    router,
    world,
    log,
    faults,
    validate: opts.validate ?? true,
    limits,
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
  const git = createGitHttpHandler({
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

  const server = await listen(opts.port ?? 0, { oidc, artifacts, git, rest });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // Shapes need the URL, which exists only once the server listens.
  (world.shapes as { api: string }).api = baseUrl;
  (world.shapes as { html: string }).html = baseUrl;
  return emulatorMethods({
    world,
    auth,
    webhooks: world.webhooks,
    log,
    gitLog,
    faults,
    actions,
    artifacts,
    oidc,
    unimplemented,
    limits,
    server,
    baseUrl,
    dataDir,
    ownDataDir,
    webhookSecret,
  });
}

/** The emulator's state and the services the routes share, for the app `opts` describe. */
function createWorld(opts: GitHubEmulatorOptions, webhookSecret: string): World {
  const appId = opts.appId ?? 1;
  const slug = opts.appSlug ?? "emulated-app";
  const botLogin = `${slug}[bot]`;
  const state = new EmulatorState();
  const auth = new Auth(appId, state, botLogin);
  state.user(botLogin, "Bot");
  const webhooks = new WebhookSender(webhookSecret, appId);
  webhooks.url = opts.webhookUrl;
  const shapes = new Shapes("", "", (login) => state.user(login));
  const owner = state.user(opts.appOwner ?? `${slug}-dev`, "Organization");
  return new World(
    state,
    auth,
    shapes,
    webhooks,
    { id: appId, slug, name: opts.appName ?? slug, botLogin, owner },
    (r) => pathToFileURL(r.git.gitDir).href,
  );
}
