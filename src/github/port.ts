/**
 * The GitHub operations Fleet uses, and nothing else: the one interface every part of Fleet talks to
 * GitHub through. Two implementations: over an Octokit (octokit-port.ts: Probot's installation
 * clients, the Action's and the CLI's token clients) and local mode's records (queue/local-github.ts).
 *
 * The data types hold the fields Fleet reads, under GitHub's REST names. A failed operation throws an
 * error carrying the HTTP `status` GitHub answered (404, 409, 422, 304 on a conditional read...) and,
 * from GitHub, its `response.headers` (e.g. `retry-after`); callers decide by the status.
 */

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

export interface Actor {
  login: string;
  /** "User", "Bot", "Organization". */
  type?: string;
}

/** A label as GitHub lists it on an issue: a name, or (in some payloads) the name alone. */
export type IssueLabel = string | { name?: string };

export interface Issue {
  /** The issue's global id (what sub-issue links take), not its number. */
  id: number;
  number: number;
  title: string;
  body?: string | null;
  state: string;
  labels: IssueLabel[];
  user: Actor | null;
  html_url: string;
  /** Present when the "issue" is a pull request (issue listings include them). */
  pull_request?: unknown;
  updated_at?: string;
}

export interface IssueComment {
  id: number;
  body?: string;
  user: Actor | null;
  html_url: string;
}

export interface IssueEvent {
  event: string;
  actor: Actor | null;
  created_at: string;
  /** On `labeled` / `unlabeled` events. */
  label?: { name?: string };
}

export interface SubIssue {
  id: number;
  number: number;
  title: string;
  state: string;
}

export interface PullRequest {
  number: number;
  state: "open" | "closed";
  merged: boolean;
  draft?: boolean;
  /** GitHub computes it in the background: null until it has. */
  mergeable?: boolean | null;
  title: string;
  body: string | null;
  html_url: string;
  /** When it was opened (ISO 8601, whole seconds). */
  created_at?: string;
  head: { ref: string; sha?: string; repo: { full_name: string } | null };
  base: { ref: string; repo: { full_name: string } };
  changed_files: number;
  additions: number;
  deletions: number;
}

/** A pull request as a listing or a write answers it. */
export interface PullRequestRef {
  number: number;
  html_url: string;
  head: { ref: string };
}

export interface ReviewComment {
  user?: Actor | null;
  path?: string;
  line?: number | null;
  original_line?: number | null;
  body?: string;
  diff_hunk?: string;
  original_commit_id?: string;
}

export interface PullRequestFile {
  filename: string;
  status: string;
  patch?: string;
}

/** POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews (https://docs.github.com/en/rest/pulls/reviews#create-a-review-for-a-pull-request). */
export interface NewPullReview {
  body: string;
  event: "COMMENT" | "APPROVE" | "REQUEST_CHANGES";
  commit_id?: string;
  comments: Array<{ path: string; line: number; side?: "LEFT" | "RIGHT"; body: string }>;
}

export interface Repository {
  default_branch: string;
  clone_url: string;
}

export interface CollaboratorPermission {
  /** admin, write, read, none: maintain folds into write and triage into read. */
  permission: string;
  /** The role itself (admin, maintain, write, triage, read). */
  role_name?: string;
}

export interface WorkflowRun {
  id: number;
  name?: string | null;
  display_title?: string;
  html_url: string;
  /** The event that started the run (`workflow_dispatch` for Fleet's). */
  event?: string;
  /** Who started this attempt of the run: Fleet's dispatches are its bot's (`<slug>[bot]`), a re-run is whoever re-ran it. */
  triggering_actor?: { login: string } | null;
}

export interface Artifact {
  id: number;
  name: string;
  size_in_bytes: number;
  expired: boolean;
  expires_at: string | null;
  workflow_run?: { id?: number } | null;
}

/** A conditional read's answer: the data and its ETag (a read with a matching ETag throws status 304). */
export interface Tagged<T> {
  data: T;
  etag?: string;
}

export interface FileContent {
  /** The file's blob sha. */
  sha: string;
  /** Base64 (with `encoding: "base64"`); empty or absent over 1 MB, when the blob is read raw instead. */
  content?: string;
  encoding?: string;
}

export interface CommitAuthor {
  name: string;
  email: string;
  date: string;
}

export interface CommitSummary {
  sha: string;
  message: string;
  /** The committer's date, "" when GitHub gives none. */
  date: string;
}

export interface LabelSpec {
  name: string;
  color: string;
  description?: string;
}

export interface GitHub {
  issues: {
    get(repo: RepoRef, issue: number): Promise<Issue>;
    /** Every issue and pull request in `state`; with `since`, only those updated since then. */
    listForRepo(repo: RepoRef, opts: { state: "open" | "closed" | "all"; since?: string }): Promise<Issue[]>;
    create(repo: RepoRef, issue: { title: string; body: string; labels?: string[] }): Promise<Issue>;
    update(
      repo: RepoRef,
      issue: number,
      patch: {
        title?: string;
        body?: string;
        state?: "open" | "closed";
        state_reason?: "completed" | "not_planned" | "reopened";
      },
    ): Promise<void>;
    listComments(repo: RepoRef, issue: number): Promise<IssueComment[]>;
    getComment(repo: RepoRef, commentId: number): Promise<IssueComment>;
    createComment(repo: RepoRef, issue: number, body: string): Promise<IssueComment>;
    updateComment(repo: RepoRef, commentId: number, body: string): Promise<IssueComment>;
    addLabels(repo: RepoRef, issue: number, labels: string[]): Promise<void>;
    removeLabel(repo: RepoRef, issue: number, name: string): Promise<void>;
    /** The repository's labels (names). */
    listLabels(repo: RepoRef): Promise<Array<{ name: string }>>;
    createLabel(repo: RepoRef, label: LabelSpec): Promise<void>;
    listEvents(repo: RepoRef, issue: number): Promise<IssueEvent[]>;
    listSubIssues(repo: RepoRef, issue: number): Promise<SubIssue[]>;
    /** Links the issue whose global `id` is `subIssueId` as a sub-issue of `issue`. */
    addSubIssue(repo: RepoRef, issue: number, subIssueId: number): Promise<void>;
    /** Pins the issue on the repository's issue list (reads its node id, then GraphQL's pinIssue). */
    pin(repo: RepoRef, issue: number): Promise<void>;
  };
  pulls: {
    get(repo: RepoRef, pull: number): Promise<PullRequest>;
    /** The pull requests from `branch` of this repository (at most 10) in `state`. */
    listForBranch(repo: RepoRef, branch: string, state: "open" | "closed" | "all"): Promise<PullRequestRef[]>;
    create(
      repo: RepoRef,
      pull: {
        head: string;
        base: string;
        title: string;
        body: string;
        maintainer_can_modify?: boolean;
        /** Opened as a draft (https://docs.github.com/en/rest/pulls/pulls#create-a-pull-request). */
        draft?: boolean;
      },
    ): Promise<PullRequestRef>;
    update(repo: RepoRef, pull: number, patch: { title?: string; body?: string }): Promise<PullRequestRef>;
    /** The inline review comments of the pull request. */
    listReviewComments(repo: RepoRef, pull: number): Promise<ReviewComment[]>;
    /** The files the pull request changes, each with its unified-diff `patch` (GitHub omits it for large or binary files). */
    listFiles(repo: RepoRef, pull: number): Promise<PullRequestFile[]>;
    /**
     * Submits one review; each inline comment is on a line of the diff (`side` RIGHT by default).
     * GitHub answers 422 for a comment on a line the diff does not show.
     */
    createReview(
      repo: RepoRef,
      pull: number,
      review: NewPullReview,
    ): Promise<{ id: number; html_url?: string }>;
    /**
     * A draft becomes ready for review: GraphQL `markPullRequestReadyForReview`, which REST has no
     * equivalent of (https://docs.github.com/en/graphql/reference/mutations#markpullrequestreadyforreview).
     */
    markReadyForReview(repo: RepoRef, pull: number): Promise<void>;
  };
  repos: {
    get(repo: RepoRef): Promise<Repository>;
    /** Throws status 404 when the branch does not exist. */
    getBranch(repo: RepoRef, branch: string): Promise<{ commit: { sha: string } }>;
    /** Throws status 404 for someone who is not a collaborator. */
    getCollaboratorPermission(repo: RepoRef, login: string): Promise<CollaboratorPermission>;
    /**
     * The YAML config file at `path` on the default branch, following `_extends` (e.g. to the
     * organization's `.github` repository); undefined when there is none. Throws on invalid YAML.
     */
    getConfig(repo: RepoRef, path: string): Promise<unknown>;
    /** The newest commits of `branch` (at most `limit`, up to 100). */
    listCommits(repo: RepoRef, branch: string, limit: number): Promise<CommitSummary[]>;
  };
  /** Files on a branch through the contents API (the state store's one-request writes). */
  contents: {
    get(repo: RepoRef, path: string, ref: string, etag?: string): Promise<Tagged<FileContent>>;
    /** Creates or replaces the file (`sha`: the blob it replaces, the CAS); one commit on `branch`. */
    put(
      repo: RepoRef,
      file: { path: string; message: string; content: string; branch: string; sha?: string },
    ): Promise<{ blobSha: string; commitSha: string; treeSha?: string; parentShas?: string[] }>;
  };
  /** The git data API (the state store's commits and fast-forward ref updates). */
  git: {
    /** `ref` as `heads/<branch>`. */
    getRef(repo: RepoRef, ref: string, etag?: string): Promise<Tagged<{ sha: string }>>;
    getCommitTree(repo: RepoRef, commitSha: string): Promise<string>;
    /** A blob's text, read raw (for files over the contents API's 1 MB). */
    getBlobText(repo: RepoRef, blobSha: string): Promise<string>;
    createTree(
      repo: RepoRef,
      tree: { baseTree?: string; files: Array<{ path: string; content: string }> },
    ): Promise<string>;
    createCommit(
      repo: RepoRef,
      commit: { message: string; tree: string; parents: string[]; author?: CommitAuthor },
    ): Promise<string>;
    /** `ref` as `refs/heads/<branch>`; throws 422 when it exists. */
    createRef(repo: RepoRef, ref: string, sha: string): Promise<void>;
    /** `ref` as `heads/<branch>`; fast-forward only: throws 422 when `sha` is not ahead. */
    fastForwardRef(repo: RepoRef, ref: string, sha: string): Promise<void>;
  };
  actions: {
    /** The newest runs (at most 50) of `workflow` started by `event`. */
    listWorkflowRuns(repo: RepoRef, workflow: string, event: string): Promise<WorkflowRun[]>;
    /** Starts `workflow` on `ref`; the run's id when GitHub tells it (newer servers do). */
    dispatchWorkflow(
      repo: RepoRef,
      workflow: string,
      dispatch: { ref: string; inputs: Record<string, string> },
    ): Promise<{ runId?: number; url?: string }>;
    /** One run by its id (https://docs.github.com/en/rest/actions/workflow-runs#get-a-workflow-run). */
    getWorkflowRun(repo: RepoRef, runId: number): Promise<WorkflowRun>;
    cancelWorkflowRun(repo: RepoRef, runId: number): Promise<void>;
    listRunArtifacts(repo: RepoRef, runId: number): Promise<Artifact[]>;
    listArtifacts(repo: RepoRef, name: string): Promise<Artifact[]>;
    /** The artifact's zip (GitHub redirects to a short-lived URL, which is followed). */
    downloadArtifact(repo: RepoRef, artifactId: number): Promise<ArrayBuffer>;
  };
  /** The repositories this client's installation may reach. */
  listInstallationRepositories(): Promise<Array<{ owner: { login: string }; name: string }>>;
  /** The token the client authenticates with (an installation token is renewed as it expires): for git. */
  token(): Promise<string>;
  /** The REST API's base URL, when there is one (the git URL is derived from it). */
  readonly apiUrl?: string;
}

/** What the GitHub App itself (its JWT, not an installation) does: find installations, mint tokens. */
export interface GitHubApp {
  listInstallations(): Promise<Array<{ id: number }>>;
  /** The installation on the repository; throws status 404 when the app is not installed there. */
  getRepoInstallation(repo: RepoRef): Promise<{ id: number }>;
  createInstallationToken(
    installationId: number,
    scope: {
      repositoryIds?: number[];
      repositories?: string[];
      permissions: Record<string, "read" | "write">;
    },
  ): Promise<{ token: string; expires_at: string }>;
}
