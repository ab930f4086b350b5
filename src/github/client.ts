import type { Octokit } from "@octokit/rest";

/**
 * The GitHub client every I/O module takes as a parameter: Probot's `context.octokit`, an
 * installation Octokit in the worker, or a user-token Octokit in the CLI all fit.
 */
export type GitHubClient = Pick<Octokit, "rest" | "paginate" | "request" | "auth">;

export interface RepoRef {
  owner: string;
  repo: string;
}

export interface IssueRef extends RepoRef {
  issue_number: number;
}

export function parseRepoFullName(fullName: string): RepoRef {
  const m = /^([A-Za-z0-9-_.]+)\/([A-Za-z0-9-_.]+)$/.exec(fullName);
  if (!m) throw new Error(`"${fullName}" is not a repository name; use owner/name, e.g. octo-org/widgets.`);
  return { owner: m[1]!, repo: m[2]! };
}
