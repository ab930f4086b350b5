import type { GitRepo } from "./git-repo.ts";

export type Permission = "admin" | "maintain" | "write" | "triage" | "read";

export interface User {
  login: string;
  id: number;
  type: "User" | "Bot" | "Organization";
}

export interface Label {
  id: number;
  name: string;
  color: string;
  description: string | null;
  default: boolean;
}

export interface Comment {
  id: number;
  issueNumber: number;
  body: string;
  user: User;
  createdAt: string;
  updatedAt: string;
}

export interface PullData {
  headRef: string;
  headSha: string;
  baseRef: string;
  baseSha: string;
  draft: boolean;
  merged: boolean;
  mergedAt: string | null;
  mergedBy: User | null;
  mergeCommitSha: string | null;
  maintainerCanModify: boolean;
  reviews: Review[];
  /** Inline review comments (on a file and line of the diff), oldest first. */
  reviewComments?: ReviewComment[];
  /** Diff figures, recomputed from git when the PR is opened or its head moves. */
  stats: {
    commits: number;
    additions: number;
    deletions: number;
    changedFiles: number;
    mergeable: boolean | null;
  };
}

export interface Review {
  id: number;
  user: User;
  body: string;
  state: "APPROVED" | "CHANGES_REQUESTED" | "COMMENTED" | "PENDING";
  commitId: string;
  submittedAt: string;
}

export interface ReviewComment {
  id: number;
  /** The review the comment belongs to (a lone comment gets a one-comment review, as on GitHub). */
  reviewId: number;
  user: User;
  body: string;
  path: string;
  line: number;
  side: "LEFT" | "RIGHT";
  startLine: number | null;
  startSide: "LEFT" | "RIGHT" | null;
  commitId: string;
  /** The diff hunk around the line, as GitHub shows it above the comment. */
  diffHunk: string;
  inReplyTo?: number;
  createdAt: string;
  updatedAt: string;
}

export interface Issue {
  id: number;
  number: number;
  title: string;
  body: string | null;
  state: "open" | "closed";
  stateReason: string | null;
  user: User;
  labels: string[];
  assignees: string[];
  comments: Comment[];
  createdAt: string;
  updatedAt: string;
  closedAt: string | null;
  closedBy: User | null;
  locked: boolean;
  pull?: PullData;
  subIssues: number[];
  parent?: number;
  /** Label changes with who made them, for the issue events API. */
  events?: IssueEventRecord[];
  /** Pinned to the repository's issue list (GraphQL `pinIssue`). */
  pinned?: boolean;
}

export interface IssueEventRecord {
  id: number;
  event: "labeled" | "unlabeled";
  actor: User;
  label: string;
  createdAt: string;
}

export interface WorkflowRun {
  id: number;
  jobId: number;
  runNumber: number;
  workflowId: number;
  workflowPath: string;
  name: string;
  headBranch: string;
  headSha: string;
  /**
   * The full ref the run is for (`github.ref`): `refs/heads/<branch>`, `refs/tags/<tag>`, or
   * `refs/pull/<n>/merge` for `pull_request` runs; `refs/heads/<headBranch>` when absent.
   */
  ref?: string;
  event: string;
  status: "queued" | "in_progress" | "completed";
  conclusion: string | null;
  inputs: Record<string, unknown>;
  actor: User;
  /** Who caused this run (a re-run's requester); the actor when absent. */
  triggeringActor?: User;
  /** Which attempt of the run this is: 2 and on after a re-run; 1 when absent. */
  runAttempt?: number;
  /** The run's title as GitHub shows it (head commit subject, PR title); the workflow name when absent. */
  displayTitle?: string;
  /** Pull requests the run belongs to (`pull_request` runs), by number. */
  pullRequests?: number[];
  createdAt: string;
  updatedAt: string;
  runStartedAt: string;
}

/** An artifact a run uploaded (actions/upload-artifact): one zip. */
export interface Artifact {
  id: number;
  name: string;
  runId: number;
  zip: Buffer;
  /** `sha256:<hex>` of the zip, as upload-artifact v4+ records it. */
  digest: string;
  createdAt: string;
  expiresAt: string;
}

/** The repository's Actions settings that the emulator models (Settings > Actions > General). */
export interface ActionsSettings {
  /** What a workflow's GITHUB_TOKEN gets when the workflow sets no `permissions:`. */
  defaultWorkflowPermissions: "read" | "write";
  /** "Allow GitHub Actions to create and approve pull requests"; off by default. */
  canApprovePullRequestReviews: boolean;
}

export interface Repo {
  id: number;
  owner: User;
  name: string;
  fullName: string;
  defaultBranch: string;
  private: boolean;
  git: GitRepo;
  installationId: number;
  labels: Map<string, Label>;
  issues: Map<number, Issue>;
  nextNumber: number;
  collaborators: Map<string, Permission>;
  runs: WorkflowRun[];
  workflowIds: Map<string, number>;
  artifacts: Artifact[];
  actionsSettings: ActionsSettings;
  /** Its branch rulesets (rulesets.ts), in the order they were added. */
  rulesets: Ruleset[];
  createdAt: string;
  pushedAt: string;
}

/**
 * A branch ruleset, as far as the emulator models one
 * (https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets):
 * the branches it targets and who may bypass it.
 */
export interface Ruleset {
  name: string;
  /** `~DEFAULT_BRANCH`, `~ALL`, or a full ref name pattern (`refs/heads/release/*`; `*` and `?`). */
  include: string[];
  /** "Require a pull request before merging": no direct update of a targeted branch. */
  rules: Array<"pull_request">;
  /** Logins (lower case) that bypass it: people, or an app's bot (`<slug>[bot]`). */
  bypass: Set<string>;
}

export interface Installation {
  id: number;
  account: User;
  repos: Set<string>;
  createdAt: string;
}

/** A workflow permission's level, as a workflow's `permissions:` block writes it. */
export type TokenPermission = "read" | "write" | "none";

/**
 * A workflow's GITHUB_TOKEN: an installation token of the GitHub Actions app, limited to the
 * workflow's repository and the permissions its `permissions:` block gives (keys as written there:
 * `contents`, `issues`, `pull-requests`, `actions`, ...).
 */
export interface WorkflowTokenScope {
  repo: string;
  permissions: Record<string, TokenPermission>;
  runId?: number;
}

/**
 * What an installation access token of the app reaches: the repositories and permissions asked for
 * when it was created (`repositories` / `repository_ids` and `permissions`), or all of the
 * installation's repositories and all of the app's permissions.
 */
export interface InstallationGrant {
  /** Full names, lower case, of the repositories it reaches; undefined: every repository of the installation. */
  repos?: Set<string>;
  /** GitHub App permission names as the REST API spells them (`pull_requests`), with their levels. */
  permissions: Record<string, "read" | "write">;
}

export type Actor =
  | { kind: "anonymous" }
  | { kind: "app" }
  | {
      kind: "installation";
      installationId: number;
      user: User;
      /** Set for a workflow's GITHUB_TOKEN. */
      workflow?: WorkflowTokenScope;
      /** Set for the app's own installation tokens. */
      grant?: InstallationGrant;
    }
  | { kind: "user"; user: User };

export const nowIso = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/** Everything the emulator knows, in memory; git data stays in the bare repositories. */
export class EmulatorState {
  private seq = 1000;
  readonly users = new Map<string, User>();
  readonly repos = new Map<string, Repo>();
  readonly installations = new Map<number, Installation>();
  readonly comments = new Map<number, { repo: Repo; comment: Comment }>();
  readonly issuesById = new Map<number, { repo: Repo; issue: Issue }>();

  nextId(): number {
    this.seq += 1;
    return this.seq;
  }

  user(login: string, type: User["type"] = "User"): User {
    const key = login.toLowerCase();
    let u = this.users.get(key);
    if (!u) {
      u = { login, id: this.nextId(), type };
      this.users.set(key, u);
    }
    return u;
  }

  repo(owner: string, name: string): Repo | undefined {
    return this.repos.get(`${owner}/${name}`.toLowerCase());
  }

  /** GitHub's effective permission: owner is admin, then collaborators, then public read. */
  permission(repo: Repo, login: string): Permission | "none" {
    if (login.toLowerCase() === repo.owner.login.toLowerCase()) return "admin";
    const p = repo.collaborators.get(login.toLowerCase());
    if (p) return p;
    return repo.private ? "none" : "read";
  }
}

const rank: Record<Permission | "none", number> = {
  none: 0,
  read: 1,
  triage: 2,
  write: 3,
  maintain: 4,
  admin: 5,
};

export function atLeast(p: Permission | "none", needed: Permission): boolean {
  return rank[p] >= rank[needed];
}
