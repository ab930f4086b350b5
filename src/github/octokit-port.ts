import type { Octokit } from "@octokit/rest";
import { composeConfigGet } from "@probot/octokit-plugin-config";
import { limitRequestsPerToken } from "./concurrency-limit.ts";
import { fetchOnFreshConnection } from "./fresh-connection-fetch.ts";
import type {
  Artifact,
  GitHub,
  GitHubApp,
  IssueEvent,
  PullRequestFile,
  RepoRef,
  ReviewComment,
  SubIssue,
  Tagged,
} from "./port.ts";

/**
 * The Octokit surface the implementation below uses: Probot's `context.octokit` and `app.auth()`
 * clients, and `@octokit/rest` clients with a token, all fit.
 */
export type OctokitClient = Pick<Octokit, "rest" | "paginate" | "request" | "auth">;

const conditional = (etag?: string) => (etag ? { "if-none-match": etag } : {});
const decodeBase64 = (s: string): string => Buffer.from(s, "base64").toString("utf8");

/** The GitHub port over an Octokit: one request per operation, listings paged 100 at a time. */
export function githubOverOctokit(octokit: OctokitClient): GitHub {
  return {
    issues: issuesOver(octokit),
    pulls: pullsOver(octokit),
    repos: reposOver(octokit),
    contents: contentsOver(octokit),
    git: gitOver(octokit),
    actions: actionsOver(octokit),
    listInstallationRepositories: () =>
      octokit.paginate(octokit.rest.apps.listReposAccessibleToInstallation, { per_page: 100 }),
    async token() {
      const auth = (await octokit.auth({ type: "installation" })) as { token?: string };
      if (!auth?.token)
        throw new Error("The GitHub client has no token to fetch and push Fleet's state branch with.");
      return auth.token;
    },
    apiUrl: (octokit.request.endpoint.DEFAULTS as { baseUrl: string }).baseUrl,
  };
}

export interface TokenClientOptions {
  token: string;
  /** The REST API's root, e.g. https://api.github.com or the emulator's URL. */
  baseUrl: string;
  userAgent?: string;
  /** Octokit's own log; default: warnings and errors to the console, less its request log (quietLog). */
  log?: OctokitLog;
}

type OctokitLog = {
  debug(m: string): void;
  info(m: string): void;
  warn(m: string): void;
  error(m: string): void;
};

/** A line of Octokit's request log: `GET /repos/o/r/git/ref/heads%2Ffleet%2Fstate - 304 with id … in 23ms`. */
const REQUEST_LOG_LINE = /^[A-Z]+ \S+ - \d{3} with id \S* in \d+ms$/;

/**
 * Octokit's default log (warnings and errors to the console) less its request log, which writes every
 * request that did not end in a 2xx as an error: each 304 of a conditional read (the state branch's
 * ref, looked at on every beat) would be an error line in the worker's and the job's log. What failed
 * is thrown to Fleet's code, which says it with what it was doing.
 */
export const quietLog: OctokitLog = {
  debug: () => {},
  info: () => {},
  warn: (m) => console.warn(m),
  error: (m) => {
    if (!REQUEST_LOG_LINE.test(m)) console.error(m);
  },
};

/** The GitHub port over a token (a person's, or an installation token handed to a run). */
export async function githubForToken(opts: TokenClientOptions): Promise<GitHub> {
  // Loaded on first use: local mode never pays for it.
  const { Octokit } = await import("@octokit/rest");
  const octokit = new Octokit({
    auth: opts.token,
    baseUrl: opts.baseUrl.replace(/\/$/, ""),
    ...(opts.userAgent ? { userAgent: opts.userAgent } : {}),
    log: opts.log ?? quietLog,
    request: { fetch: githubFetch },
  });
  return githubOverOctokit(octokit);
}

/** Methods whose repetition changes nothing more than the first request did (RFC 9110, 9.2.2; PATCH as Fleet uses it: a whole body). */
const REPEATABLE = new Set(["GET", "HEAD", "PUT", "PATCH", "DELETE"]);

/**
 * fetch, again once when the connection closed before any answer: a kept-alive connection the server
 * closed as the request went out (seen at 100 tasks on one worker: "other side closed"). A POST is
 * never sent twice, since it may have created a comment or a pull request: it goes over a connection
 * of its own instead, which has no such moment (seen at 5 and 20 workers: "read ECONNRESET").
 */
export async function fetchRetryingClosedConnections(
  input: string | URL | Request,
  init?: RequestInit,
): Promise<Response> {
  const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
  if (!REPEATABLE.has(method)) return fetchOnFreshConnection(input, init) ?? fetch(input, init);
  try {
    return await fetch(input, init);
  } catch (error) {
    if (!closedBeforeAnswer(error) || init?.signal?.aborted) throw error;
    return fetch(input, init);
  }
}

/**
 * The fetch every Octokit of Fleet's uses (the app's, a worker's, the action's): a few requests in
 * flight per token (see concurrency-limit.ts), each sent as fetchRetryingClosedConnections sends it.
 */
export const githubFetch = limitRequestsPerToken(fetchRetryingClosedConnections);

/** undici's errors for a connection that ended without a response (its `cause`'s code). */
function closedBeforeAnswer(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } })?.cause;
  return ["UND_ERR_SOCKET", "ECONNRESET", "EPIPE", "UND_ERR_CLOSED"].includes(cause?.code ?? "");
}

/** What the app does as itself over its JWT-authenticated Octokit (Probot's `app.auth()`). */
export function githubAppOverOctokit(octokit: OctokitClient): GitHubApp {
  return {
    listInstallations: () => octokit.paginate(octokit.rest.apps.listInstallations, { per_page: 100 }),
    getRepoInstallation: async (repo) => (await octokit.rest.apps.getRepoInstallation({ ...repo })).data,
    async createInstallationToken(installationId, scope) {
      const { data } = await octokit.rest.apps.createInstallationAccessToken({
        installation_id: installationId,
        ...(scope.repositoryIds ? { repository_ids: scope.repositoryIds } : {}),
        ...(scope.repositories ? { repositories: scope.repositories } : {}),
        permissions: scope.permissions,
      });
      return { token: data.token, expires_at: data.expires_at };
    },
  };
}

function issuesOver(octokit: OctokitClient): GitHub["issues"] {
  const { issues } = octokit.rest;
  return {
    get: async (repo, issue) => (await issues.get({ ...repo, issue_number: issue })).data,
    listForRepo: (repo, opts) =>
      octokit.paginate(issues.listForRepo, {
        ...repo,
        state: opts.state,
        ...(opts.since !== undefined ? { since: opts.since } : {}),
        per_page: 100,
      }),
    create: async (repo, issue) =>
      (
        await issues.create({
          ...repo,
          title: issue.title,
          body: issue.body,
          ...(issue.labels ? { labels: issue.labels } : {}),
        })
      ).data,
    async update(repo, issue, patch) {
      await issues.update({ ...repo, issue_number: issue, ...patch });
    },
    listComments: (repo, issue) =>
      octokit.paginate(issues.listComments, { ...repo, issue_number: issue, per_page: 100 }),
    getComment: async (repo, id) => (await issues.getComment({ ...repo, comment_id: id })).data,
    createComment: async (repo, issue, body) =>
      (await issues.createComment({ ...repo, issue_number: issue, body })).data,
    updateComment: async (repo, id, body) =>
      (await issues.updateComment({ ...repo, comment_id: id, body })).data,
    async addLabels(repo, issue, labels) {
      await issues.addLabels({ ...repo, issue_number: issue, labels });
    },
    async removeLabel(repo, issue, name) {
      await issues.removeLabel({ ...repo, issue_number: issue, name });
    },
    listLabels: (repo) => octokit.paginate(issues.listLabelsForRepo, { ...repo, per_page: 100 }),
    async createLabel(repo, label) {
      await issues.createLabel({ ...repo, ...label });
    },
    listEvents: async (repo, issue) =>
      (await octokit.paginate(issues.listEvents, {
        ...repo,
        issue_number: issue,
        per_page: 100,
      })) as IssueEvent[],
    listSubIssues: async (repo, issue) =>
      (await octokit.paginate("GET /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", {
        ...repo,
        issue_number: issue,
        per_page: 100,
      })) as SubIssue[],
    async addSubIssue(repo, issue, subIssueId) {
      await octokit.request("POST /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", {
        ...repo,
        issue_number: issue,
        sub_issue_id: subIssueId,
      });
    },
    async pin(repo, issue) {
      const { data } = await issues.get({ ...repo, issue_number: issue });
      await octokit.request("POST /graphql", {
        query: "mutation($id: ID!) { pinIssue(input: { issueId: $id }) { issue { number } } }",
        variables: { id: data.node_id },
      });
    },
  };
}

function pullsOver(octokit: OctokitClient): GitHub["pulls"] {
  const { pulls } = octokit.rest;
  return {
    get: async (repo, pull) => (await pulls.get({ ...repo, pull_number: pull })).data,
    listForBranch: async (repo, branch, state) =>
      (await pulls.list({ ...repo, head: `${repo.owner}:${branch}`, state, per_page: 10 })).data,
    create: async (repo, pull) => (await pulls.create({ ...repo, ...pull })).data,
    update: async (repo, pull, patch) => (await pulls.update({ ...repo, pull_number: pull, ...patch })).data,
    listReviewComments: async (repo, pull) =>
      (await octokit.paginate("GET /repos/{owner}/{repo}/pulls/{pull_number}/comments", {
        ...repo,
        pull_number: pull,
        per_page: 100,
      })) as ReviewComment[],
    listFiles: async (repo, pull) =>
      (await octokit.paginate("GET /repos/{owner}/{repo}/pulls/{pull_number}/files", {
        ...repo,
        pull_number: pull,
        per_page: 100,
      })) as PullRequestFile[],
    createReview: async (repo, pull, review) =>
      (await pulls.createReview({ ...repo, pull_number: pull, ...review })).data,
    async markReadyForReview(repo, pull) {
      const { data } = await pulls.get({ ...repo, pull_number: pull });
      if (!data.draft) return;
      const answer = await octokit.request("POST /graphql", {
        query:
          "mutation($id: ID!) { markPullRequestReadyForReview(input: { pullRequestId: $id }) { pullRequest { number } } }",
        variables: { id: data.node_id },
      });
      // GraphQL answers 200 with `errors` for a refusal.
      const errors = (answer.data as { errors?: Array<{ message?: string }> }).errors;
      if (errors?.length)
        throw new Error(
          `GitHub did not mark #${pull} ready for review: ${errors.map((e) => e.message).join("; ")}`,
        );
    },
  };
}

function reposOver(octokit: OctokitClient): GitHub["repos"] {
  const { repos } = octokit.rest;
  return {
    get: async (repo) => (await repos.get({ ...repo })).data,
    getBranch: async (repo, branch) => (await repos.getBranch({ ...repo, branch })).data,
    getCollaboratorPermission: async (repo, login) =>
      (await repos.getCollaboratorPermissionLevel({ ...repo, username: login })).data,
    // Probot's config loader (@probot/octokit-plugin-config), which follows `_extends`.
    async getConfig(repo, path) {
      const { config, files } = await composeConfigGet(octokit as never, { ...repo, path });
      return files.some((f) => f.config !== null) ? config : undefined;
    },
    async listCommits(repo, branch, limit) {
      const { data } = await octokit.request("GET /repos/{owner}/{repo}/commits", {
        ...repo,
        sha: branch,
        per_page: Math.min(100, limit),
      });
      return data.map((c) => ({
        sha: c.sha,
        message: c.commit.message,
        date: c.commit.committer?.date ?? "",
      }));
    },
  };
}

function contentsOver(octokit: OctokitClient): GitHub["contents"] {
  return {
    async get(repo, path, ref, etag) {
      const r = await octokit.request("GET /repos/{owner}/{repo}/contents/{path}", {
        ...repo,
        path,
        ref,
        headers: conditional(etag),
      });
      const data = r.data as { sha: string; content?: string; encoding?: string };
      return {
        data: { sha: data.sha, content: data.content, encoding: data.encoding },
        etag: r.headers.etag,
      };
    },
    async put(repo, file) {
      const { data } = await octokit.request("PUT /repos/{owner}/{repo}/contents/{path}", {
        ...repo,
        path: file.path,
        message: file.message,
        content: file.content,
        branch: file.branch,
        ...(file.sha ? { sha: file.sha } : {}),
      });
      return {
        blobSha: data.content?.sha ?? "",
        commitSha: data.commit.sha ?? "",
        treeSha: data.commit.tree?.sha,
        // https://docs.github.com/en/rest/repos/contents#create-or-update-file-contents: the commit made, with its parents.
        parentShas: (data.commit.parents ?? []).flatMap((p) => (p.sha ? [p.sha] : [])),
      };
    },
  };
}

function gitOver(octokit: OctokitClient): GitHub["git"] {
  return {
    async getRef(repo, ref, etag): Promise<Tagged<{ sha: string }>> {
      const r = await octokit.request("GET /repos/{owner}/{repo}/git/ref/{ref}", {
        ...repo,
        ref,
        headers: conditional(etag),
      });
      return { data: { sha: r.data.object.sha }, etag: r.headers.etag };
    },
    async getCommitTree(repo, commitSha) {
      const r = await octokit.request("GET /repos/{owner}/{repo}/git/commits/{commit_sha}", {
        ...repo,
        commit_sha: commitSha,
      });
      return r.data.tree.sha;
    },
    async getBlobText(repo, blobSha) {
      const raw = await octokit.request("GET /repos/{owner}/{repo}/git/blobs/{file_sha}", {
        ...repo,
        file_sha: blobSha,
        headers: { accept: "application/vnd.github.raw+json" },
      });
      const d: unknown = raw.data;
      // Raw text or bytes; a server that ignores the raw media type answers the JSON blob (base64).
      if (typeof d === "string") return d;
      return d instanceof ArrayBuffer
        ? Buffer.from(d).toString("utf8")
        : decodeBase64((d as { content: string }).content);
    },
    async createTree(repo, tree) {
      const r = await octokit.request("POST /repos/{owner}/{repo}/git/trees", {
        ...repo,
        ...(tree.baseTree !== undefined ? { base_tree: tree.baseTree } : {}),
        tree: tree.files.map((f) => ({
          path: f.path,
          mode: "100644" as const,
          type: "blob" as const,
          content: f.content,
        })),
      });
      return r.data.sha;
    },
    async createCommit(repo, commit) {
      const r = await octokit.request("POST /repos/{owner}/{repo}/git/commits", {
        ...repo,
        message: commit.message,
        tree: commit.tree,
        parents: commit.parents,
        ...(commit.author ? { author: commit.author } : {}),
      });
      return r.data.sha;
    },
    async createRef(repo, ref, sha) {
      await octokit.request("POST /repos/{owner}/{repo}/git/refs", { ...repo, ref, sha });
    },
    async fastForwardRef(repo, ref, sha) {
      await octokit.request("PATCH /repos/{owner}/{repo}/git/refs/{ref}", {
        ...repo,
        ref,
        sha,
        force: false,
      });
    },
  };
}

function actionsOver(octokit: OctokitClient): GitHub["actions"] {
  const { actions } = octokit.rest;
  return {
    listWorkflowRuns: async (repo: RepoRef, workflow: string, event: string) =>
      (await actions.listWorkflowRuns({ ...repo, workflow_id: workflow, event, per_page: 50 })).data
        .workflow_runs,
    getWorkflowRun: async (repo: RepoRef, runId: number) =>
      (await actions.getWorkflowRun({ ...repo, run_id: runId })).data,
    async dispatchWorkflow(repo, workflow, dispatch) {
      const response = await actions.createWorkflowDispatch({
        ...repo,
        workflow_id: workflow,
        ref: dispatch.ref,
        inputs: dispatch.inputs,
        // GitHub answers with the run's id when asked; older servers ignore it (204, no body).
        return_run_details: true,
      });
      const details = (response.data ?? undefined) as
        | { workflow_run_id?: number; html_url?: string }
        | undefined;
      return {
        ...(details?.workflow_run_id !== undefined ? { runId: details.workflow_run_id } : {}),
        ...(details?.html_url !== undefined ? { url: details.html_url } : {}),
      };
    },
    async cancelWorkflowRun(repo, runId) {
      await actions.cancelWorkflowRun({ ...repo, run_id: runId });
    },
    listRunArtifacts: async (repo, runId) =>
      (await actions.listWorkflowRunArtifacts({ ...repo, run_id: runId, per_page: 100 })).data
        .artifacts as Artifact[],
    listArtifacts: async (repo, name) =>
      (await actions.listArtifactsForRepo({ ...repo, name, per_page: 100 })).data.artifacts as Artifact[],
    async downloadArtifact(repo, artifactId) {
      const { data } = await actions.downloadArtifact({
        ...repo,
        artifact_id: artifactId,
        archive_format: "zip",
      });
      return data as ArrayBuffer;
    },
  };
}
