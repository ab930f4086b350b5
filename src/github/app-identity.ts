import type { OctokitClient } from "./octokit-port.ts";

/** The GitHub App as GitHub knows it (`GET /app` with its JWT). */
export interface AppIdentity {
  id: number;
  slug: string;
  name: string;
  owner?: string;
  /** The permissions the app was registered with (e.g. `{ issues: "write" }`). */
  permissions: Record<string, string>;
}

/**
 * `GET /app` over the app's JWT-authenticated Octokit (Probot's `app.auth()`): GitHub checks the JWT's
 * signature against the app's key and its issuer against the app id, so this is the one request that
 * says whether APP_ID and the private key are right.
 */
export async function getAppIdentity(octokit: OctokitClient): Promise<AppIdentity> {
  const { data } = await octokit.rest.apps.getAuthenticated();
  if (!data) throw new Error("GitHub answered GET /app with no app.");
  const owner = data.owner && "login" in data.owner ? data.owner.login : undefined;
  return {
    id: data.id,
    slug: data.slug ?? "",
    name: data.name,
    ...(owner ? { owner } : {}),
    permissions: { ...(data.permissions as Record<string, string>) },
  };
}
