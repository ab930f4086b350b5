import { HttpError, notFound } from "./http-error.ts";
import type { Ctx } from "./router.ts";
import type { Repo, TokenPermission, WorkflowTokenScope } from "./state.ts";

/**
 * What a workflow job's GITHUB_TOKEN may do. It is an installation token of the GitHub Actions app,
 * valid for the workflow's repository only, with the permissions of the workflow's `permissions:`
 * block (https://docs.github.com/en/actions/security-for-github-actions/security-guides/automatic-token-authentication#permissions-for-the-github_token).
 * Which permission an endpoint needs follows
 * https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps (write for
 * any method but GET/HEAD); `metadata: read` is always granted.
 */
export const DEFAULT_WORKFLOW_TOKEN_PERMISSIONS: Record<string, TokenPermission> = {
  contents: "write",
  issues: "write",
  "pull-requests": "write",
};

/** The permissions an endpoint accepts (any one of them is enough), by the spec's route template. */
export function permissionsFor(template: string): string[] {
  const rest = template.replace(/^\/repos\/\{owner\}\/\{repo\}/, "");
  if (rest === template) return ["metadata"];
  if (rest.startsWith("/actions/permissions")) return ["administration"];
  if (rest.startsWith("/actions/")) return ["actions"];
  if (/^\/pulls\/\{pull_number\}\/merge$/.test(rest)) return ["contents"];
  if (rest.startsWith("/pulls")) return ["pull-requests"];
  // Comments, labels and assignees of a pull request take either permission on GitHub.
  if (rest.startsWith("/issues") || rest.startsWith("/labels")) return ["issues", "pull-requests"];
  if (/^\/(contents|git|commits|branches|compare|merges|tarball|zipball|dispatches)(\/|$)/.test(rest))
    return ["contents"];
  if (/^\/(statuses|check-runs|check-suites)(\/|$)/.test(rest)) return ["statuses", "checks"];
  return ["metadata"];
}

const rank: Record<TokenPermission, number> = { none: 0, read: 1, write: 2 };

/** Whether a GITHUB_TOKEN with `scope` holds `permission` at `level` or higher. */
export function holds(scope: WorkflowTokenScope, permission: string, level: "read" | "write"): boolean {
  if (permission === "metadata") return level === "read";
  return rank[scope.permissions[permission] ?? "none"] >= rank[level];
}

/**
 * Checks a GITHUB_TOKEN request: another repository is not found (the token knows no other), and a
 * missing permission answers 403 "Resource not accessible by integration", GitHub's words for it.
 */
export function checkWorkflowToken(scope: WorkflowTokenScope, repo: Repo, ctx: Ctx): void {
  if (scope.repo.toLowerCase() !== repo.fullName.toLowerCase()) throw notFound();
  const level = ctx.method === "GET" || ctx.method === "HEAD" ? "read" : "write";
  const needed = permissionsFor(ctx.template);
  if (!needed.some((p) => holds(scope, p, level))) {
    throw new HttpError(403, "Resource not accessible by integration", {
      documentation_url: "https://docs.github.com/rest",
    });
  }
}
