import { rm } from "node:fs/promises";
import type { Server } from "node:http";
import type { Actions } from "./actions.ts";
import type { EmulatedIssue, GitHubEmulator, JobEnvironment } from "./api.ts";
import type { ArtifactStore } from "./artifact-store.ts";
import type { Auth } from "./auth.ts";
import type { Faults } from "./faults.ts";
import type { GitRequestLog } from "./git-http.ts";
import { APP_PERMISSIONS } from "./installation-token.ts";
import type { OidcProvider } from "./oidc.ts";
import type { RateLimits } from "./rate-limits.ts";
import { createRepository } from "./repositories.ts";
import type { RequestLog } from "./request-log.ts";
import { installationJson } from "./routes/apps.ts";
import type { Installation, Repo } from "./state.ts";
import type { WebhookSender } from "./webhooks.ts";
import { DEFAULT_WORKFLOW_TOKEN_PERMISSIONS } from "./workflow-token.ts";
import type { World } from "./world.ts";

/** The running emulator's pieces, as the GitHubEmulator methods reach them. */
export interface EmulatorParts {
  world: World;
  auth: Auth;
  webhooks: WebhookSender;
  log: RequestLog;
  gitLog: GitRequestLog;
  faults: Faults;
  actions: Actions;
  artifacts: ArtifactStore;
  oidc: OidcProvider;
  unimplemented: Array<{ method: string; path: string; route: string; inSpec: boolean }>;
  limits: RateLimits;
  server: Server;
  baseUrl: string;
  dataDir: string;
  /** The data directory was made for this emulator and goes with it. */
  ownDataDir: boolean;
  webhookSecret: string;
}

/** The GitHubEmulator handed to tests: what they set up, look at and move along, besides the HTTP API. */
export function emulatorMethods(p: EmulatorParts): GitHubEmulator {
  const { world, auth, webhooks, server } = p;
  return {
    url: p.baseUrl,
    oidcIssuer: p.oidc.issuer,
    appId: world.app.id,
    appSlug: world.app.slug,
    botLogin: world.app.botLogin,
    privateKey: auth.privateKey,
    webhookSecret: p.webhookSecret,
    dataDir: p.dataDir,
    setWebhookUrl(url) {
      webhooks.url = url;
    },
    ...repositoryMethods(p),
    ...inspectionMethods(p),
    ...actionsMethods(p),
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await webhooks.waitForIdle();
      for (const repo of world.state.repos.values()) repo.git.close();
      if (p.ownDataDir) await rm(p.dataDir, { recursive: true, force: true });
    },
  };
}

const mustRepo = (w: World, fullName: string): Repo => {
  const r = w.state.repos.get(fullName.toLowerCase());
  if (!r) throw new Error(`the emulator has no repository ${fullName}`);
  return r;
};

const mustRun = (w: World, fullName: string, runId: number) => {
  const repo = mustRepo(w, fullName);
  const run = repo.runs.find((r) => r.id === runId);
  if (!run) throw new Error(`no workflow run ${runId} in ${fullName}`);
  return { repo, run };
};

/** Repositories, people and the app's installations. */
function repositoryMethods(
  p: EmulatorParts,
): Pick<
  GitHubEmulator,
  | "createRepo"
  | "addCollaborator"
  | "addRuleset"
  | "userToken"
  | "installationId"
  | "emitInstallation"
  | "reinstallApp"
> {
  const { world: w, auth } = p;
  return {
    createRepo: (input) => createRepository(w.state, p.dataDir, p.baseUrl, input),
    addCollaborator(fullName, login, permission) {
      const repo = mustRepo(w, fullName);
      w.state.user(login);
      repo.collaborators.set(login.toLowerCase(), permission);
    },
    addRuleset(fullName, ruleset) {
      mustRepo(w, fullName).rulesets.push({
        name: ruleset.name,
        include: [...ruleset.include],
        rules: [...ruleset.rules],
        bypass: new Set((ruleset.bypass ?? []).map((l) => l.toLowerCase())),
      });
    },
    userToken: (login) => auth.userToken(login),
    installationId: (fullName) => mustRepo(w, fullName).installationId,
    emitInstallation(fullName) {
      emitInstallationEvent(p, w.state.installations.get(mustRepo(w, fullName).installationId)!, "created");
    },
    reinstallApp(fullName) {
      const old = w.state.installations.get(mustRepo(w, fullName).installationId)!;
      w.state.installations.delete(old.id);
      auth.revokeInstallation(old.id);
      emitInstallationEvent(p, old, "deleted");
      const fresh = { ...old, id: w.state.nextId(), createdAt: new Date().toISOString() };
      w.state.installations.set(fresh.id, fresh);
      for (const n of fresh.repos) w.state.repos.get(n.toLowerCase())!.installationId = fresh.id;
      emitInstallationEvent(p, fresh, "created");
      return fresh.id;
    },
  };
}

/** An `installation` webhook (https://docs.github.com/en/webhooks/webhook-events-and-payloads#installation). */
function emitInstallationEvent(p: EmulatorParts, inst: Installation, action: "created" | "deleted"): void {
  const w = p.world;
  const at = Math.floor(Date.parse(inst.createdAt) / 1000);
  const payload = {
    action,
    installation: {
      ...installationJson(w, inst),
      permissions: { ...APP_PERMISSIONS },
      events: ["issues", "issue_comment", "pull_request", "push", "workflow_run"],
      created_at: at,
      updated_at: at,
    },
    repositories: [...inst.repos].map((n) => {
      const r = w.state.repos.get(n.toLowerCase())!;
      return {
        id: r.id,
        node_id: w.shapes.nodeId("Repository", r.id),
        name: r.name,
        full_name: r.fullName,
        private: r.private,
      };
    }),
    sender: w.shapes.user(inst.account),
  };
  p.webhooks.enqueue(`installation:${inst.id}`, "installation", payload);
}

function issueView(w: World, fullName: string, number: number): EmulatedIssue | undefined {
  const i = w.state.repos.get(fullName.toLowerCase())?.issues.get(number);
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
    subIssues: i.subIssues.map((id) => w.state.issuesById.get(id)?.issue.number ?? -1),
    parent: i.parent !== undefined ? w.state.issuesById.get(i.parent)?.issue.number : undefined,
    comments: i.comments.map((c) => ({
      id: c.id,
      body: c.body,
      user: { login: c.user.login, type: c.user.type },
    })),
  };
}

/** What tests look at: issues, pull requests, deliveries, requests, faults. */
function inspectionMethods(
  p: EmulatorParts,
): Pick<
  GitHubEmulator,
  | "issue"
  | "comments"
  | "pulls"
  | "deliveries"
  | "redeliver"
  | "waitForDeliveries"
  | "requests"
  | "gitRequests"
  | "counts"
  | "unimplemented"
  | "peakConcurrentRequests"
  | "faults"
> {
  const { world: w, webhooks, log, faults } = p;
  return {
    issue: (fullName, number) => issueView(w, fullName, number),
    comments: (fullName, number) => issueView(w, fullName, number)?.comments ?? [],
    pulls: (fullName) =>
      [...mustRepo(w, fullName).issues.values()]
        .filter((i) => i.pull)
        .map((i) => ({
          number: i.number,
          head: i.pull!.headRef,
          base: i.pull!.baseRef,
          state: i.state,
          merged: i.pull!.merged,
          title: i.title,
          body: i.body ?? "",
        })),
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
    gitRequests: p.gitLog,
    counts: (filter) => log.counts(filter),
    unimplemented: () => [...p.unimplemented],
    peakConcurrentRequests: () => Object.fromEntries(p.limits.peakConcurrent),
    faults: { inject: (f) => faults.inject(f), clear: () => faults.clear() },
  };
}

/** Workflow runs, their tokens and artifacts: what a runner and the tests do around Actions. */
function actionsMethods(
  p: EmulatorParts,
): Pick<
  GitHubEmulator,
  | "workflowRuns"
  | "setWorkflowRunStatus"
  | "onWorkflowDispatch"
  | "workflowToken"
  | "jobEnvironment"
  | "uploadArtifact"
  | "artifacts"
> {
  const { world: w, auth, actions } = p;
  const workflowToken: GitHubEmulator["workflowToken"] = (fullName, opts = {}) => {
    const repo = mustRepo(w, fullName);
    return auth.workflowToken(repo.installationId, {
      repo: repo.fullName,
      permissions: { ...(opts.permissions ?? DEFAULT_WORKFLOW_TOKEN_PERMISSIONS) },
      runId: opts.runId,
    });
  };
  return {
    workflowRuns: (fullName) => mustRepo(w, fullName).runs.map((r) => ({ ...r })),
    async setWorkflowRunStatus(fullName, runId, status, conclusion) {
      const { repo, run } = mustRun(w, fullName, runId);
      await actions.setStatus(repo, run, status, conclusion);
    },
    onWorkflowDispatch(listener) {
      actions.listeners.push(listener);
    },
    workflowToken,
    jobEnvironment(fullName, runId, opts = {}) {
      const { run } = mustRun(w, fullName, runId);
      const env: JobEnvironment = {
        GITHUB_TOKEN: workflowToken(fullName, { runId, permissions: opts.permissions }),
      };
      if (opts.idToken !== false) {
        const { url, token } = p.oidc.requestFor(run);
        env.ACTIONS_ID_TOKEN_REQUEST_URL = url;
        env.ACTIONS_ID_TOKEN_REQUEST_TOKEN = token;
      }
      return env;
    },
    async uploadArtifact(fullName, runId, name, files, opts = {}) {
      const { repo, run } = mustRun(w, fullName, runId);
      const a = p.artifacts.upload(repo, run, name, files, opts.retentionDays);
      return { id: a.id, name: a.name, sizeInBytes: a.zip.length };
    },
    artifacts: (fullName) =>
      mustRepo(w, fullName).artifacts.map((a) => ({
        id: a.id,
        name: a.name,
        runId: a.runId,
        sizeInBytes: a.zip.length,
      })),
  };
}
