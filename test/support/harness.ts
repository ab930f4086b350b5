import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { type FleetServer, startFleetServer } from "../../src/app/server.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit, quietLog } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { FLEET_APP } from "./fleet-app.ts";

export interface Harness {
  gh: GitHubEmulator;
  app: FleetServer;
  owner: string;
  name: string;
  full: string;
  cloneUrl: string;
  /** Acting as a maintainer with write access. */
  mona: Octokit;
  newIssue(title: string, body?: string): Promise<number>;
  label(issue: number, ...labels: string[]): Promise<void>;
  /** Mona removes `label` from the issue (the app's answer settled). */
  unlabel(issue: number, label: string): Promise<void>;
  comment(issue: number, body: string, as?: Octokit): Promise<void>;
  /** Fleet's tasks as the state branch holds them now. */
  tasks(): Promise<Task[]>;
  botComments(issue: number): Array<{ id: number; body: string }>;
  settle(): Promise<void>;
  stop(): Promise<void>;
}

/** Every app instance started on an emulator, so settling waits for whichever one got the deliveries. */
const instances = new WeakMap<GitHubEmulator, Set<FleetServer>>();

/** Resolves when no app instance started on `gh` is handling a delivery. */
export async function allInstancesIdle(gh: GitHubEmulator): Promise<void> {
  await Promise.all([...(instances.get(gh) ?? [])].map((app) => app.idle()));
}

/**
 * Another instance of the real app on the same offline GitHub (a restart, a replica), receiving its
 * webhooks from now on; counting-friendly (no retry or throttling), quiet, no reconcile timer.
 */
export async function startAppInstance(
  gh: GitHubEmulator,
  extra: Partial<Parameters<typeof startFleetServer>[0]> = {},
): Promise<FleetServer> {
  const app = await startFleetServer({
    appId: gh.appId,
    privateKey: gh.privateKey,
    webhookSecret: gh.webhookSecret,
    baseUrl: gh.url,
    resilient: false,
    logLevel: "fatal",
    trackerIntervalMs: 0,
    reconcileMs: 0,
    // Runners exchange the emulator's OIDC tokens for the app's token.
    actionsTokens: { issuer: gh.oidcIssuer },
    ...extra,
  });
  gh.setWebhookUrl(app.webhookUrl);
  if (!instances.has(gh)) instances.set(gh, new Set());
  instances.get(gh)!.add(app);
  return app;
}

/** The offline GitHub plus the real Fleet app on loopback, one repository seeded. */
export async function startHarness(
  opts: {
    files?: Record<string, string>;
    name?: string;
    trackerIntervalMs?: number;
    /** The app's clock (scheduling, budgets, rate-limit resets); real time by default. */
    clock?: () => Date;
    /** More options for the app (e.g. a short stateResetHoldMs). */
    app?: Partial<Parameters<typeof startFleetServer>[0]>;
  } = {},
): Promise<Harness> {
  const gh = await startGitHubEmulator(FLEET_APP);
  const owner = "octo-org";
  const name = opts.name ?? "widgets";
  const full = `${owner}/${name}`;
  const { cloneUrl } = await gh.createRepo({
    owner,
    name,
    files: { "README.md": "# widgets\n", ...opts.files },
  });
  gh.addCollaborator(full, "mona", "write");
  const app = await startAppInstance(gh, {
    trackerIntervalMs: opts.trackerIntervalMs ?? 0,
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...opts.app,
  });
  const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona"), log: quietLog });
  const reader = createGitHubStateStore({ github: githubOverOctokit(mona), owner, repo: name });
  // Deliveries answered and every handler done; handlers may cause more deliveries, so until both are quiet.
  const settle = async () => {
    for (let i = 0; i < 10; i++) {
      await gh.waitForDeliveries();
      // Deliveries are answered on receipt and handled after, by whichever instance received them.
      await allInstancesIdle(gh);
      const pending = gh.deliveries().some((d) => d.status === "pending");
      if (!pending) return;
    }
  };
  return {
    gh,
    app,
    owner,
    name,
    full,
    cloneUrl,
    mona,
    async newIssue(title, body = "") {
      const { data } = await mona.rest.issues.create({ owner, repo: name, title, body });
      return data.number;
    },
    async label(issue, ...labels) {
      await mona.rest.issues.addLabels({ owner, repo: name, issue_number: issue, labels });
      await settle();
    },
    async unlabel(issue, label) {
      await mona.rest.issues.removeLabel({ owner, repo: name, issue_number: issue, name: label });
      await settle();
    },
    async comment(issue, body, as = mona) {
      await as.rest.issues.createComment({ owner, repo: name, issue_number: issue, body });
      await settle();
    },
    async tasks() {
      return Object.values((await reader.read()).doc.tasks);
    },
    botComments: (issue) => gh.comments(full, issue).filter((c) => c.user.type === "Bot"),
    settle,
    async stop() {
      await app.stop();
      await gh.stop();
    },
  };
}
