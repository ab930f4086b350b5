import { HttpError, notFound } from "../http-error.ts";
import { APP_PERMISSIONS, grantFor } from "../installation-token.ts";
import type { Ctx, Router } from "../router.ts";
import type { Installation } from "../state.ts";
import { paginate, type World } from "../world.ts";

const events = [
  "issues",
  "issue_comment",
  "pull_request",
  "pull_request_review",
  "push",
  "workflow_run",
  "workflow_job",
];

/**
 * The app's own endpoints, called with its JWT: the app, its installations, and installation access
 * tokens (https://docs.github.com/en/rest/apps/apps).
 */
export function registerAppRoutes(r: Router, w: World): void {
  r.on("GET /app", (ctx) => {
    requireApp(ctx);
    return { status: 200, body: appJson(w) };
  });

  r.on("GET /app/installations", (ctx) => {
    requireApp(ctx);
    return paginate(
      ctx,
      w.shapes.api,
      [...w.state.installations.values()].map((i) => installationJson(w, i)),
    );
  });

  r.on("GET /app/installations/{installation_id}", (ctx) => {
    requireApp(ctx);
    const i = w.state.installations.get(Number(ctx.params.installation_id));
    if (!i) throw notFound();
    return { status: 200, body: installationJson(w, i) };
  });

  r.on("GET /repos/{owner}/{repo}/installation", (ctx) => {
    requireApp(ctx);
    const repo = w.state.repo(String(ctx.params.owner), String(ctx.params.repo));
    if (!repo) throw notFound();
    return { status: 200, body: installationJson(w, w.state.installations.get(repo.installationId)!) };
  });

  // https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app:
  // `repositories` / `repository_ids` and `permissions` narrow the token (see installation-token.ts);
  // the response echoes the permissions granted and lists the repositories it reaches.
  r.on("POST /app/installations/{installation_id}/access_tokens", (ctx) => {
    requireApp(ctx);
    const i = w.state.installations.get(Number(ctx.params.installation_id));
    if (!i) throw notFound();
    const { grant, repos } = grantFor(w.state, i, ctx.body);
    const { token, expiresAt } = w.auth.installationToken(i.id, grant);
    return {
      status: 201,
      body: {
        token,
        expires_at: expiresAt,
        permissions: { ...grant.permissions },
        // The emulator's installations are all "selected"; a narrowed token is "selected" too.
        repository_selection: "selected",
        repositories: repos.map((x) => w.repoJson(x)),
      },
    };
  });
}

function requireApp(ctx: Ctx): void {
  if (ctx.actor.kind !== "app") {
    throw new HttpError(401, "A JSON web token could not be decoded", {
      documentation_url: "https://docs.github.com/rest",
    });
  }
}

function appJson(w: World) {
  return {
    id: w.app.id,
    slug: w.app.slug,
    client_id: `Iv1.${String(w.app.id).padStart(16, "0")}`,
    node_id: w.shapes.nodeId("App", w.app.id),
    owner: w.shapes.user(w.app.owner),
    name: w.app.name,
    description: `${w.app.name} (emulated)`,
    external_url: w.shapes.html,
    html_url: `${w.shapes.html}/apps/${w.app.slug}`,
    created_at: "2024-01-01T00:00:00Z",
    updated_at: "2024-01-01T00:00:00Z",
    permissions: APP_PERMISSIONS,
    events,
    installations_count: w.state.installations.size,
  };
}

/** An installation of the app, as the REST API answers it (the `installation` webhook adjusts a few fields). */
export function installationJson(w: World, i: Installation) {
  return {
    id: i.id,
    account: w.shapes.user(i.account),
    repository_selection: "selected",
    access_tokens_url: `${w.shapes.api}/app/installations/${i.id}/access_tokens`,
    repositories_url: `${w.shapes.api}/installation/repositories`,
    html_url: `${w.shapes.html}/settings/installations/${i.id}`,
    app_id: w.app.id,
    app_slug: w.app.slug,
    target_id: i.account.id,
    target_type: i.account.type === "Organization" ? "Organization" : "User",
    permissions: APP_PERMISSIONS,
    events,
    created_at: i.createdAt,
    updated_at: i.createdAt,
    single_file_name: null,
    has_multiple_single_files: false,
    single_file_paths: [],
    suspended_by: null,
    suspended_at: null,
  };
}
