import { AsyncLocalStorage } from "node:async_hooks";
import type { Auth } from "./auth.ts";
import { HttpError, notFound } from "./http-error.ts";
import { checkInstallationGrant } from "./installation-token.ts";
import type { Shapes } from "./payloads.ts";
import type { Ctx, Reply } from "./router.ts";
import {
  type Actor,
  atLeast,
  type EmulatorState,
  type Issue,
  type Permission,
  type Repo,
  type User,
} from "./state.ts";
import type { WebhookSender } from "./webhooks.ts";
import { checkWorkflowToken } from "./workflow-token.ts";

/** Starts the workflow runs an event triggers (actions.ts); absent until Actions is made. */
export interface WorkflowTriggers {
  pushed(repo: Repo, ref: string, before: string | null, after: string | null, pusher?: User): Promise<void>;
  pullRequest(
    repo: Repo,
    pull: Issue,
    action: "opened" | "synchronize" | "reopened",
    sender?: User,
  ): Promise<void>;
}

/** Per-request facts that webhook emission needs without threading them through every call. */
export interface RequestScope {
  actor: Actor;
  dropDeliveries: boolean;
}

export const requestScope = new AsyncLocalStorage<RequestScope>();

/** Shared services and helpers for route modules. */
export class World {
  workflowTriggers: WorkflowTriggers | undefined;
  readonly state: EmulatorState;
  readonly auth: Auth;
  readonly shapes: Shapes;
  readonly webhooks: WebhookSender;
  readonly app: { id: number; slug: string; name: string; botLogin: string; owner: User };
  readonly cloneUrl: (r: Repo) => string;

  constructor(
    state: EmulatorState,
    auth: Auth,
    shapes: Shapes,
    webhooks: WebhookSender,
    app: { id: number; slug: string; name: string; botLogin: string; owner: User },
    cloneUrl: (r: Repo) => string,
  ) {
    this.state = state;
    this.auth = auth;
    this.shapes = shapes;
    this.webhooks = webhooks;
    this.app = app;
    this.cloneUrl = cloneUrl;
  }

  /** The repository named by the path, checked against what the caller may see and do. */
  repo(ctx: Ctx, need: Permission | "none" = "read"): Repo {
    const r = this.state.repo(String(ctx.params.owner), String(ctx.params.repo));
    if (!r) throw notFound();
    const a = ctx.actor;
    if (a.kind === "app") throw new HttpError(401, "A JSON web token cannot be used to access this endpoint");
    if (a.kind === "installation") {
      if (a.installationId !== r.installationId) throw notFound();
      if (a.workflow) checkWorkflowToken(a.workflow, r, ctx);
      if (a.grant) checkInstallationGrant(a.grant, r, ctx);
      return r;
    }
    if (a.kind === "anonymous") {
      if (r.private) throw notFound();
      if (need !== "none" && need !== "read") throw new HttpError(401, "Requires authentication");
      return r;
    }
    const p = this.state.permission(r, a.user.login);
    if (p === "none") throw notFound();
    if (need !== "none" && !atLeast(p, need)) {
      // GitHub hides writes the caller may not make behind 403 (or 404 for pushes).
      throw new HttpError(403, `Must have ${need} access to repository ${r.fullName}`, {
        documentation_url: "https://docs.github.com/rest",
      });
    }
    return r;
  }

  issue(r: Repo, n: unknown): Issue {
    const i = r.issues.get(Number(n));
    if (!i) throw notFound();
    return i;
  }

  /** The user the caller acts as: a person, or the app's bot for installation tokens. */
  actingUser(ctx: Ctx): User {
    const a = ctx.actor;
    if (a.kind === "user" || a.kind === "installation") return a.user;
    throw new HttpError(401, "Requires authentication");
  }

  association =
    (r: Repo) =>
    (u: User): string => {
      if (u.login.toLowerCase() === r.owner.login.toLowerCase()) return "OWNER";
      if (r.collaborators.has(u.login.toLowerCase())) return "COLLABORATOR";
      return "NONE";
    };

  openIssues(r: Repo): number {
    let n = 0;
    for (const i of r.issues.values()) if (i.state === "open") n += 1;
    return n;
  }

  repoJson(r: Repo) {
    return this.shapes.repo(r, this.openIssues(r), this.cloneUrl(r));
  }

  issueJson(r: Repo, i: Issue) {
    return this.shapes.issue(r, i, this.association(r));
  }

  pullJsonSync(r: Repo, i: Issue) {
    return this.shapes.pull(r, i, this.repoJson(r), this.association(r), i.pull!.stats);
  }

  /** The "simple pull request" embedded in review events: no merge state or diff figures. */
  simplePullJson(r: Repo, i: Issue) {
    const full = this.pullJsonSync(r, i) as Record<string, unknown>;
    for (const k of [
      "merged",
      "mergeable",
      "rebaseable",
      "mergeable_state",
      "merged_by",
      "comments",
      "review_comments",
      "maintainer_can_modify",
      "commits",
      "additions",
      "deletions",
      "changed_files",
    ]) {
      delete full[k];
    }
    return full;
  }

  installationLite(r: Repo) {
    return { id: r.installationId, node_id: this.shapes.nodeId("Installation", r.installationId) };
  }

  /** Whether the request in progress uses a workflow's GITHUB_TOKEN (its events start no workflow run). */
  byWorkflowToken(): boolean {
    const a = requestScope.getStore()?.actor;
    return a?.kind === "installation" && a.workflow !== undefined;
  }

  /** Whoever made the request in progress (the app's bot for installation tokens), else the owner. */
  currentUser(r: Repo): User {
    const scope = requestScope.getStore();
    return scope && (scope.actor.kind === "user" || scope.actor.kind === "installation")
      ? scope.actor.user
      : r.owner;
  }

  /**
   * Queues a webhook about a repository. The sender is whoever made the request (the app's
   * bot for installation tokens), unless given.
   */
  emit(r: Repo, event: string, payload: Record<string, unknown>, sender?: User): void {
    const scope = requestScope.getStore();
    const who = sender ?? this.currentUser(r);
    const full = {
      ...payload,
      repository: this.repoJson(r),
      sender: this.shapes.user(who),
      installation: this.installationLite(r),
    };
    this.webhooks.enqueue(r.fullName, event, full, scope?.dropDeliveries ?? false);
  }
}

/** Slices a list the way GitHub pages it and builds the Link header (first/prev/next/last). */
export function paginate<T>(ctx: Ctx, apiBase: string, items: T[]): Reply & { body: T[] } {
  const perPage = Math.min(Math.max(Number(ctx.params.per_page ?? 30) || 30, 1), 100);
  const page = Math.max(Number(ctx.params.page ?? 1) || 1, 1);
  const last = Math.max(Math.ceil(items.length / perPage), 1);
  const body = items.slice((page - 1) * perPage, page * perPage);
  const link = (p: number, rel: string) => {
    const q = new URLSearchParams(ctx.query);
    q.set("per_page", String(perPage));
    q.set("page", String(p));
    return `<${apiBase}${ctx.path}?${q.toString()}>; rel="${rel}"`;
  };
  const links: string[] = [];
  if (page > 1) links.push(link(page - 1, "prev"));
  if (page < last) links.push(link(page + 1, "next"), link(last, "last"));
  if (page > 1) links.push(link(1, "first"));
  return { status: 200, body, headers: links.length ? { link: links.join(", ") } : {} };
}
