import { HttpError, notFound } from "../http-error.ts";
import { APP_PERMISSIONS, grantFor, grantReaches } from "../installation-token.ts";
import type { Ctx, Router } from "../router.ts";
import type { Installation } from "../state.ts";
import { paginate, type World } from "../world.ts";

const permissions = APP_PERMISSIONS;
const events = [
  "issues",
  "issue_comment",
  "pull_request",
  "pull_request_review",
  "push",
  "workflow_run",
  "workflow_job",
];

/** App authentication: app JWT -> installation -> installation access token. */
export function registerAppRoutes(r: Router, w: World): void {
  const requireApp = (ctx: Ctx) => {
    if (ctx.actor.kind !== "app") {
      throw new HttpError(401, "A JSON web token could not be decoded", {
        documentation_url: "https://docs.github.com/rest",
      });
    }
  };

  const appJson = () => ({
    id: w.app.id,
    slug: w.app.slug,
    client_id: `Iv1.${String(w.app.id).padStart(16, "0")}`,
    node_id: w.shapes.nodeId("App", w.app.id),
    owner: w.shapes.user(w.app.owner),
    name: w.app.name,
    description: "Fleet (emulated)",
    external_url: w.shapes.html,
    html_url: `${w.shapes.html}/apps/${w.app.slug}`,
    created_at: "2024-01-01T00:00:00Z",
    updated_at: "2024-01-01T00:00:00Z",
    permissions,
    events,
    installations_count: w.state.installations.size,
  });

  const installationJson = (i: Installation) => ({
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
    permissions,
    events,
    created_at: i.createdAt,
    updated_at: i.createdAt,
    single_file_name: null,
    has_multiple_single_files: false,
    single_file_paths: [],
    suspended_by: null,
    suspended_at: null,
  });

  r.on("GET /app", (ctx) => {
    requireApp(ctx);
    return { status: 200, body: appJson() };
  });

  r.on("GET /app/installations", (ctx) => {
    requireApp(ctx);
    return paginate(ctx, w.shapes.api, [...w.state.installations.values()].map(installationJson));
  });

  r.on("GET /app/installations/{installation_id}", (ctx) => {
    requireApp(ctx);
    const i = w.state.installations.get(Number(ctx.params.installation_id));
    if (!i) throw notFound();
    return { status: 200, body: installationJson(i) };
  });

  r.on("GET /repos/{owner}/{repo}/installation", (ctx) => {
    requireApp(ctx);
    const repo = w.state.repo(String(ctx.params.owner), String(ctx.params.repo));
    if (!repo) throw notFound();
    return { status: 200, body: installationJson(w.state.installations.get(repo.installationId)!) };
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

  // https://docs.github.com/en/rest/apps/installations#list-repositories-accessible-to-the-app-installation:
  // the repositories the token reaches (a narrowed token lists only its own).
  r.on("GET /installation/repositories", (ctx) => {
    if (ctx.actor.kind !== "installation")
      throw new HttpError(403, "Resource not accessible by personal access token");
    const actor = ctx.actor;
    const i = w.state.installations.get(actor.installationId)!;
    const repos = [...i.repos]
      .map((n) => w.state.repos.get(n.toLowerCase())!)
      .filter(Boolean)
      .filter((x) => !actor.grant || grantReaches(actor.grant, x))
      .filter((x) => !actor.workflow || actor.workflow.repo.toLowerCase() === x.fullName.toLowerCase());
    const page = paginate(
      ctx,
      w.shapes.api,
      repos.map((x) => w.repoJson(x)),
    );
    return {
      ...page,
      body: { total_count: repos.length, repository_selection: "selected", repositories: page.body },
    };
  });

  r.on("GET /user", (ctx) => {
    if (ctx.actor.kind !== "user") {
      throw new HttpError(
        ctx.actor.kind === "anonymous" ? 401 : 403,
        ctx.actor.kind === "anonymous" ? "Requires authentication" : "Resource not accessible by integration",
      );
    }
    return { status: 200, body: userDetail(w, ctx.actor.user.login) };
  });

  r.on("GET /users/{username}", (ctx) => {
    const u = w.state.users.get(String(ctx.params.username).toLowerCase());
    if (!u) throw notFound();
    return { status: 200, body: userDetail(w, u.login) };
  });
}

function userDetail(w: World, login: string) {
  const u = w.state.user(login);
  return {
    ...w.shapes.user(u),
    name: u.login,
    company: null,
    blog: "",
    location: null,
    email: null,
    hireable: null,
    bio: null,
    twitter_username: null,
    public_repos: 0,
    public_gists: 0,
    followers: 0,
    following: 0,
    created_at: "2024-01-01T00:00:00Z",
    updated_at: "2024-01-01T00:00:00Z",
  };
}
