import type { DispatchListener } from "./actions.ts";
import type { FaultSpec } from "./faults.ts";
import type { GitRequest } from "./git-http.ts";
import type { LoggedRequest } from "./request-log.ts";
import type { Permission, TokenPermission, WorkflowRun } from "./state.ts";

// The emulator's public face: what startGitHubEmulator (index.ts) returns and takes.

export interface GitHubEmulatorOptions {
  port?: number;
  dataDir?: string;
  webhookSecret?: string;
  webhookUrl?: string;
  appId?: number;
  /** OpenAPI request validation; default true. */
  validate?: boolean;
  /** The app's slug; its bot user is `<slug>[bot]`. Default "emulated-app". */
  appSlug?: string;
  /** The app's name (`GET /app`); default its slug. */
  appName?: string;
  /** The organization that owns the app; default `<slug>-dev`. */
  appOwner?: string;
  /** Primary rate limit per token per hour; default 5000 (GitHub's installation limit). */
  rateLimit?: number;
  /**
   * Enforce GitHub's content-creation secondary limits per token (GitHub: 80 a minute, 500 an
   * hour) with 403 + retry-after. Off by default so ordinary tests are not throttled.
   */
  contentLimits?: { perMinute?: number; perHour?: number };
  /**
   * Requests one caller (token, or address when anonymous) may have in flight at once; more are
   * refused with 403 and retry-after, as GitHub's secondary limit does. Default 100 (GitHub's).
   */
  concurrentRequests?: number;
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
  /**
   * A branch ruleset on the repository (as Settings -> Rules -> Rulesets makes one), modelled as far
   * as rulesets.ts says: `include` targets (`~DEFAULT_BRANCH`, `~ALL`, `refs/heads/<pattern>`), the
   * `pull_request` rule ("Require a pull request before merging": no direct update by git or REST,
   * pull requests merge), and `bypass` logins (a person, or an app's bot such as `fleet[bot]`).
   */
  addRuleset(
    fullName: string,
    ruleset: { name: string; include: string[]; rules: Array<"pull_request">; bypass?: string[] },
  ): void;
  userToken(login: string): string;
  installationId(fullName: string): number;
  emitInstallation(fullName: string): void;
  /**
   * The app uninstalled from the account owning `fullName`, then installed again: the installation is
   * deleted (its tokens revoked, \`installation.deleted\` sent), and a new one with a new id holds the
   * same repositories (\`installation.created\` sent). Returns the new installation's id.
   */
  reinstallApp(fullName: string): number;
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
  /** The most REST and GraphQL requests each caller (`installation:<id>`, `user:<login>`, `app`, `ip:<address>`) had in flight at once. */
  peakConcurrentRequests(): Record<string, number>;
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
