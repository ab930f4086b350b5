import { HttpError, notFound } from "./http-error.ts";
import type { Ctx } from "./router.ts";
import type { EmulatorState, Installation, InstallationGrant, Repo } from "./state.ts";
import { permissionsFor } from "./workflow-token.ts";

/**
 * The permissions the emulated app was granted, spelled as the REST API spells GitHub App
 * permissions (`pull_requests`, not the workflow file's `pull-requests`):
 * https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps
 */
export const APP_PERMISSIONS: Readonly<Record<string, "read" | "write">> = {
  actions: "write",
  contents: "write",
  issues: "write",
  metadata: "read",
  pull_requests: "write",
  workflows: "write",
};

const CREATE_TOKEN_DOCS =
  "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app";

const rank = { read: 1, write: 2 } as const;

/** A new installation token's reach, and the repositories its response lists. */
export interface NewGrant {
  grant: InstallationGrant;
  /** The repositories the token reaches, in the installation's order. */
  repos: Repo[];
}

/**
 * What `POST /app/installations/{installation_id}/access_tokens` grants, following
 * https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app:
 * `repositories` (names, not full names) and `repository_ids` narrow the token to those
 * repositories, which must all be the installation's; `permissions` narrows it to those
 * permissions, which the app must hold at that level or higher. Without them the token gets every
 * repository of the installation and all of the app's permissions. A repository outside the
 * installation, or a permission the app was not granted (a misspelled one such as `pull-requests`
 * included), answers 422 (a response the page lists) with the messages GitHub gives, as reported in
 * https://github.com/tibdex/github-app-token/issues/105 (repositories) and
 * https://github.com/peter-murray/workflow-application-token-action/issues/48 (permissions; a
 * `pull-requests` key answers 422 too: https://github.com/actions/create-github-app-token/issues/245).
 */
export function grantFor(state: EmulatorState, installation: Installation, body: unknown): NewGrant {
  const b = (body ?? {}) as { repositories?: string[]; repository_ids?: number[]; permissions?: object };
  const installed = [...installation.repos]
    .map((n) => state.repos.get(n.toLowerCase()))
    .filter((r): r is Repo => r !== undefined);

  const names = b.repositories ?? [];
  const ids = b.repository_ids ?? [];
  const narrowed = names.length > 0 || ids.length > 0;
  let repos = installed;
  if (narrowed) {
    const wanted = new Set<Repo>();
    for (const name of names) {
      // A full name ("octo/widgets") is not a repository name and is not found, as on GitHub.
      const r = installed.find((x) => x.name.toLowerCase() === String(name).toLowerCase());
      if (!r) throw inaccessibleRepository();
      wanted.add(r);
    }
    for (const id of ids) {
      const r = installed.find((x) => x.id === Number(id));
      if (!r) throw inaccessibleRepository();
      wanted.add(r);
    }
    repos = installed.filter((r) => wanted.has(r));
  }

  let permissions: Record<string, "read" | "write">;
  if (b.permissions === undefined) permissions = { ...APP_PERMISSIONS };
  else {
    permissions = {};
    for (const [name, level] of Object.entries(b.permissions) as Array<[string, unknown]>) {
      const held = APP_PERMISSIONS[name];
      if (!held || (level !== "read" && level !== "write") || rank[level] > rank[held])
        throw new HttpError(422, "The permissions requested are not granted to this installation.", {
          documentation_url: CREATE_TOKEN_DOCS,
        });
      permissions[name] = level;
    }
    // Repository metadata is read-only and granted to every app that has repository permissions:
    // https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps#repository-permissions-for-metadata
    permissions.metadata ??= "read";
  }

  return {
    grant: {
      repos: narrowed ? new Set(repos.map((r) => r.fullName.toLowerCase())) : undefined,
      permissions,
    },
    repos,
  };
}

function inaccessibleRepository(): HttpError {
  return new HttpError(
    422,
    "There is at least one repository that does not exist or is not accessible to the parent installation.",
    { documentation_url: CREATE_TOKEN_DOCS },
  );
}

/** Whether an installation token holds an app permission (either spelling) at `level` or higher. */
export function grantHolds(grant: InstallationGrant, permission: string, level: "read" | "write"): boolean {
  const name = permission.replace(/-/g, "_");
  if (name === "metadata") return level === "read";
  const held = grant.permissions[name];
  return held !== undefined && rank[held] >= rank[level];
}

/** Whether an installation token reaches the repository (others are not found for it). */
export function grantReaches(grant: InstallationGrant, repo: Repo): boolean {
  return grant.repos === undefined || grant.repos.has(repo.fullName.toLowerCase());
}

/**
 * Checks a request made with the app's installation token: a repository the token was not given is
 * not found, and an endpoint whose permission the token lacks answers 403 "Resource not accessible
 * by integration" (https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps).
 */
export function checkInstallationGrant(grant: InstallationGrant, repo: Repo, ctx: Ctx): void {
  if (!grantReaches(grant, repo)) throw notFound();
  const level = ctx.method === "GET" || ctx.method === "HEAD" ? "read" : "write";
  if (!permissionsFor(ctx.template).some((p) => grantHolds(grant, p, level))) {
    throw new HttpError(403, "Resource not accessible by integration", {
      documentation_url: "https://docs.github.com/rest",
    });
  }
}
