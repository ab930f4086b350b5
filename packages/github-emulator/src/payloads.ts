import type { CommitInfo } from "./git-repo.ts";
import type { Comment, Issue, Label, Repo, Review, ReviewComment, User, WorkflowRun } from "./state.ts";

const UNSIGNED = { verified: false, reason: "unsigned", signature: null, payload: null, verified_at: null };

/** GitHub wraps base64 content at 60 characters a line. */
export function wrap64(s: string): string {
  return s.replace(/(.{60})/g, "$1\n");
}

/**
 * JSON shapes of GitHub objects, shared by REST responses and webhook payloads. Field sets
 * follow @octokit/webhooks-schemas (which forbid extra fields), so tests can validate them.
 */
export class Shapes {
  readonly api: string;
  readonly html: string;
  private readonly userOf: (login: string) => User;
  constructor(api: string, html: string, userOf: (login: string) => User) {
    this.api = api;
    this.html = html;
    this.userOf = userOf;
  }

  nodeId(kind: string, id: number): string {
    return Buffer.from(`0:${kind}${id}`).toString("base64").replace(/=+$/, "");
  }

  user(u: User) {
    const api = `${this.api}/users/${u.login}`;
    return {
      login: u.login,
      id: u.id,
      node_id: this.nodeId(u.type === "Bot" ? "Bot" : "User", u.id),
      avatar_url: `${this.html}/avatars/u/${u.id}?v=4`,
      gravatar_id: "",
      url: api,
      html_url: `${this.html}/${u.login}`,
      followers_url: `${api}/followers`,
      following_url: `${api}/following{/other_user}`,
      gists_url: `${api}/gists{/gist_id}`,
      starred_url: `${api}/starred{/owner}{/repo}`,
      subscriptions_url: `${api}/subscriptions`,
      organizations_url: `${api}/orgs`,
      repos_url: `${api}/repos`,
      events_url: `${api}/events{/privacy}`,
      received_events_url: `${api}/received_events`,
      type: u.type,
      site_admin: false,
    };
  }

  repo(r: Repo, openIssues: number, cloneUrl: string) {
    const api = `${this.api}/repos/${r.fullName}`;
    return {
      id: r.id,
      node_id: this.nodeId("Repository", r.id),
      name: r.name,
      full_name: r.fullName,
      private: r.private,
      owner: this.user(r.owner),
      html_url: `${this.html}/${r.fullName}`,
      description: null,
      fork: false,
      url: api,
      forks_url: `${api}/forks`,
      keys_url: `${api}/keys{/key_id}`,
      collaborators_url: `${api}/collaborators{/collaborator}`,
      teams_url: `${api}/teams`,
      hooks_url: `${api}/hooks`,
      issue_events_url: `${api}/issues/events{/number}`,
      events_url: `${api}/events`,
      assignees_url: `${api}/assignees{/user}`,
      branches_url: `${api}/branches{/branch}`,
      tags_url: `${api}/tags`,
      blobs_url: `${api}/git/blobs{/sha}`,
      git_tags_url: `${api}/git/tags{/sha}`,
      git_refs_url: `${api}/git/refs{/sha}`,
      trees_url: `${api}/git/trees{/sha}`,
      statuses_url: `${api}/statuses/{sha}`,
      languages_url: `${api}/languages`,
      stargazers_url: `${api}/stargazers`,
      contributors_url: `${api}/contributors`,
      subscribers_url: `${api}/subscribers`,
      subscription_url: `${api}/subscription`,
      commits_url: `${api}/commits{/sha}`,
      git_commits_url: `${api}/git/commits{/sha}`,
      comments_url: `${api}/comments{/number}`,
      issue_comment_url: `${api}/issues/comments{/number}`,
      contents_url: `${api}/contents/{+path}`,
      compare_url: `${api}/compare/{base}...{head}`,
      merges_url: `${api}/merges`,
      archive_url: `${api}/{archive_format}{/ref}`,
      downloads_url: `${api}/downloads`,
      issues_url: `${api}/issues{/number}`,
      pulls_url: `${api}/pulls{/number}`,
      milestones_url: `${api}/milestones{/number}`,
      notifications_url: `${api}/notifications{?since,all,participating}`,
      labels_url: `${api}/labels{/name}`,
      releases_url: `${api}/releases{/id}`,
      deployments_url: `${api}/deployments`,
      created_at: r.createdAt,
      updated_at: r.pushedAt,
      pushed_at: r.pushedAt,
      git_url: cloneUrl,
      ssh_url: cloneUrl,
      clone_url: cloneUrl,
      svn_url: `${this.html}/${r.fullName}`,
      homepage: null,
      size: 0,
      stargazers_count: 0,
      watchers_count: 0,
      language: null,
      has_issues: true,
      has_projects: false,
      has_downloads: true,
      has_wiki: false,
      has_pages: false,
      has_discussions: false,
      forks_count: 0,
      mirror_url: null,
      archived: false,
      disabled: false,
      open_issues_count: openIssues,
      license: null,
      allow_forking: true,
      is_template: false,
      web_commit_signoff_required: false,
      topics: [],
      visibility: r.private ? "private" : "public",
      forks: 0,
      open_issues: openIssues,
      watchers: 0,
      default_branch: r.defaultBranch,
      custom_properties: {},
    };
  }

  label(r: Repo, l: Label) {
    return {
      id: l.id,
      node_id: this.nodeId("Label", l.id),
      url: `${this.api}/repos/${r.fullName}/labels/${encodeURIComponent(l.name)}`,
      name: l.name,
      color: l.color,
      default: l.default,
      description: l.description,
    };
  }

  issue(r: Repo, i: Issue, association: (u: User) => string) {
    const api = `${this.api}/repos/${r.fullName}/issues/${i.number}`;
    const labels = i.labels.map((n) => r.labels.get(n.toLowerCase())).filter((l): l is Label => !!l);
    const assignees = i.assignees.map((login) => this.user(this.userOf(login)));
    const out: Record<string, unknown> = {
      url: api,
      repository_url: `${this.api}/repos/${r.fullName}`,
      labels_url: `${api}/labels{/name}`,
      comments_url: `${api}/comments`,
      events_url: `${api}/events`,
      html_url: `${this.html}/${r.fullName}/${i.pull ? "pull" : "issues"}/${i.number}`,
      id: i.id,
      node_id: this.nodeId(i.pull ? "PullRequest" : "Issue", i.id),
      number: i.number,
      title: i.title,
      user: this.user(i.user),
      labels: labels.map((l) => this.label(r, l)),
      state: i.state,
      locked: i.locked,
      assignee: assignees[0] ?? null,
      assignees,
      milestone: null,
      comments: i.comments.length,
      created_at: i.createdAt,
      updated_at: i.updatedAt,
      closed_at: i.closedAt,
      author_association: association(i.user),
      active_lock_reason: null,
      body: i.body,
      reactions: this.reactions(api),
      timeline_url: `${api}/timeline`,
      performed_via_github_app: null,
      state_reason: i.stateReason,
    };
    if (i.pull) {
      out.draft = i.pull.draft;
      out.pull_request = {
        url: `${this.api}/repos/${r.fullName}/pulls/${i.number}`,
        html_url: `${this.html}/${r.fullName}/pull/${i.number}`,
        diff_url: `${this.html}/${r.fullName}/pull/${i.number}.diff`,
        patch_url: `${this.html}/${r.fullName}/pull/${i.number}.patch`,
        merged_at: i.pull.mergedAt,
      };
    }
    return out;
  }

  reactions(url: string) {
    return {
      url: `${url}/reactions`,
      total_count: 0,
      "+1": 0,
      "-1": 0,
      laugh: 0,
      hooray: 0,
      confused: 0,
      heart: 0,
      rocket: 0,
      eyes: 0,
    };
  }

  comment(r: Repo, c: Comment, association: (u: User) => string) {
    const url = `${this.api}/repos/${r.fullName}/issues/comments/${c.id}`;
    return {
      url,
      html_url: `${this.html}/${r.fullName}/issues/${c.issueNumber}#issuecomment-${c.id}`,
      issue_url: `${this.api}/repos/${r.fullName}/issues/${c.issueNumber}`,
      id: c.id,
      node_id: this.nodeId("IssueComment", c.id),
      user: this.user(c.user),
      created_at: c.createdAt,
      updated_at: c.updatedAt,
      author_association: association(c.user),
      body: c.body,
      reactions: this.reactions(url),
      performed_via_github_app: null,
    };
  }

  pull(
    r: Repo,
    i: Issue,
    repoJson: unknown,
    association: (u: User) => string,
    extra: {
      commits: number;
      additions: number;
      deletions: number;
      changedFiles: number;
      mergeable: boolean | null;
    },
  ) {
    const p = i.pull!;
    const api = `${this.api}/repos/${r.fullName}/pulls/${i.number}`;
    const issueApi = `${this.api}/repos/${r.fullName}/issues/${i.number}`;
    const labels = i.labels.map((n) => r.labels.get(n.toLowerCase())).filter((l): l is Label => !!l);
    const assignees = i.assignees.map((login) => this.user(this.userOf(login)));
    const ref = (branch: string, sha: string) => ({
      label: `${r.owner.login}:${branch}`,
      ref: branch,
      sha,
      user: this.user(r.owner),
      repo: repoJson,
    });
    const link = (href: string) => ({ href });
    return {
      url: api,
      id: i.id,
      node_id: this.nodeId("PullRequest", i.id),
      html_url: `${this.html}/${r.fullName}/pull/${i.number}`,
      diff_url: `${this.html}/${r.fullName}/pull/${i.number}.diff`,
      patch_url: `${this.html}/${r.fullName}/pull/${i.number}.patch`,
      issue_url: issueApi,
      number: i.number,
      state: i.state,
      locked: i.locked,
      title: i.title,
      user: this.user(i.user),
      body: i.body,
      created_at: i.createdAt,
      updated_at: i.updatedAt,
      closed_at: i.closedAt,
      merged_at: p.mergedAt,
      merge_commit_sha: p.mergeCommitSha,
      assignee: assignees[0] ?? null,
      assignees,
      requested_reviewers: [],
      requested_teams: [],
      labels: labels.map((l) => this.label(r, l)),
      milestone: null,
      commits_url: `${api}/commits`,
      review_comments_url: `${api}/comments`,
      review_comment_url: `${this.api}/repos/${r.fullName}/pulls/comments{/number}`,
      comments_url: `${issueApi}/comments`,
      statuses_url: `${this.api}/repos/${r.fullName}/statuses/${p.headSha}`,
      head: ref(p.headRef, p.headSha),
      base: ref(p.baseRef, p.baseSha),
      _links: {
        self: link(api),
        html: link(`${this.html}/${r.fullName}/pull/${i.number}`),
        issue: link(issueApi),
        comments: link(`${issueApi}/comments`),
        review_comments: link(`${api}/comments`),
        review_comment: link(`${this.api}/repos/${r.fullName}/pulls/comments{/number}`),
        commits: link(`${api}/commits`),
        statuses: link(`${this.api}/repos/${r.fullName}/statuses/${p.headSha}`),
      },
      author_association: association(i.user),
      auto_merge: null,
      active_lock_reason: null,
      draft: p.draft,
      merged: p.merged,
      mergeable: extra.mergeable,
      rebaseable: extra.mergeable,
      mergeable_state: p.merged || i.state === "closed" ? "unknown" : extra.mergeable ? "clean" : "dirty",
      merged_by: p.mergedBy ? this.user(p.mergedBy) : null,
      comments: i.comments.length,
      review_comments: p.reviewComments?.length ?? 0,
      maintainer_can_modify: p.maintainerCanModify,
      commits: extra.commits,
      additions: extra.additions,
      deletions: extra.deletions,
      changed_files: extra.changedFiles,
    };
  }

  /**
   * A pull request review. Its `state` is upper case in the REST API ("COMMENTED",
   * https://docs.github.com/en/rest/pulls/reviews#list-reviews-for-a-pull-request) and lower case in
   * the `pull_request_review` event ("commented",
   * https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request_review).
   */
  review(r: Repo, i: Issue, rv: Review, association: (u: User) => string, form: "rest" | "event" = "rest") {
    const prApi = `${this.api}/repos/${r.fullName}/pulls/${i.number}`;
    const html = `${this.html}/${r.fullName}/pull/${i.number}#pullrequestreview-${rv.id}`;
    return {
      id: rv.id,
      node_id: this.nodeId("PullRequestReview", rv.id),
      user: this.user(rv.user),
      body: rv.body || null,
      commit_id: rv.commitId,
      submitted_at: rv.submittedAt,
      state: form === "event" ? rv.state.toLowerCase() : rv.state,
      html_url: html,
      pull_request_url: prApi,
      author_association: association(rv.user),
      _links: { html: { href: html }, pull_request: { href: prApi } },
    };
  }

  /** An inline review comment, as the REST API and `pull_request_review_comment` events carry it. */
  reviewComment(r: Repo, i: Issue, c: ReviewComment, association: (u: User) => string) {
    const url = `${this.api}/repos/${r.fullName}/pulls/comments/${c.id}`;
    const prApi = `${this.api}/repos/${r.fullName}/pulls/${i.number}`;
    const html = `${this.html}/${r.fullName}/pull/${i.number}#discussion_r${c.id}`;
    // The position counts lines below the hunk header; the hunk ends at the commented line.
    const position = c.diffHunk.split("\n").length - 1;
    return {
      url,
      pull_request_review_id: c.reviewId,
      id: c.id,
      node_id: this.nodeId("PullRequestReviewComment", c.id),
      diff_hunk: c.diffHunk,
      path: c.path,
      position,
      original_position: position,
      commit_id: c.commitId,
      original_commit_id: c.commitId,
      user: this.user(c.user),
      body: c.body,
      created_at: c.createdAt,
      updated_at: c.updatedAt,
      html_url: html,
      pull_request_url: prApi,
      author_association: association(c.user),
      _links: { self: { href: url }, html: { href: html }, pull_request: { href: prApi } },
      start_line: c.startLine,
      original_start_line: c.startLine,
      start_side: c.startSide,
      line: c.line,
      original_line: c.line,
      side: c.side,
      ...(c.inReplyTo !== undefined ? { in_reply_to_id: c.inReplyTo } : {}),
      subject_type: "line",
      reactions: this.reactions(url),
    };
  }

  gitCommit(r: Repo, c: CommitInfo) {
    const api = `${this.api}/repos/${r.fullName}/git`;
    return {
      sha: c.sha,
      node_id: this.nodeId("Commit", Number.parseInt(c.sha.slice(0, 8), 16)),
      url: `${api}/commits/${c.sha}`,
      html_url: `${this.html}/${r.fullName}/commit/${c.sha}`,
      author: c.author,
      committer: c.committer,
      tree: { sha: c.tree, url: `${api}/trees/${c.tree}` },
      message: c.message,
      parents: c.parents.map((p) => ({
        sha: p,
        url: `${api}/commits/${p}`,
        html_url: `${this.html}/${r.fullName}/commit/${p}`,
      })),
      verification: { ...UNSIGNED },
    };
  }

  /** A commit as the REST API lists it (`repos.getCommit`, `pulls.listCommits`, a branch's head). */
  commit(r: Repo, c: CommitInfo) {
    const api = `${this.api}/repos/${r.fullName}`;
    return {
      sha: c.sha,
      node_id: this.nodeId("Commit", Number.parseInt(c.sha.slice(0, 8), 16)),
      commit: {
        author: c.author,
        committer: c.committer,
        message: c.message,
        tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
        url: `${api}/git/commits/${c.sha}`,
        comment_count: 0,
        verification: { ...UNSIGNED },
      },
      url: `${api}/commits/${c.sha}`,
      html_url: `${this.html}/${r.fullName}/commit/${c.sha}`,
      comments_url: `${api}/commits/${c.sha}/comments`,
      author: null,
      committer: null,
      parents: c.parents.map((p) => ({
        sha: p,
        url: `${api}/commits/${p}`,
        html_url: `${this.html}/${r.fullName}/commit/${p}`,
      })),
    };
  }

  /** A file of a diff (`files` of a commit, a comparison or a pull request); no line figures. */
  diffFile(sha: string, f: { status: string; path: string }) {
    return {
      sha,
      filename: f.path,
      status: f.status === "A" ? "added" : f.status === "D" ? "removed" : "modified",
      additions: 0,
      deletions: 0,
      changes: 0,
      blob_url: "",
      raw_url: "",
      contents_url: "",
    };
  }

  workflow(r: Repo, run: Pick<WorkflowRun, "workflowId" | "workflowPath" | "name">, at: string) {
    return {
      id: run.workflowId,
      node_id: this.nodeId("Workflow", run.workflowId),
      name: run.name,
      path: run.workflowPath,
      state: "active",
      created_at: at,
      updated_at: at,
      url: `${this.api}/repos/${r.fullName}/actions/workflows/${run.workflowId}`,
      html_url: `${this.html}/${r.fullName}/blob/${r.defaultBranch}/${run.workflowPath}`,
      badge_url: `${this.html}/${r.fullName}/workflows/${encodeURIComponent(run.name)}/badge.svg`,
    };
  }

  workflowRun(
    r: Repo,
    run: WorkflowRun,
    repoJson: unknown,
    headCommit: CommitInfo | undefined,
    pulls: Array<{
      id: number;
      number: number;
      headRef: string;
      headSha: string;
      baseRef: string;
      baseSha: string;
    }> = [],
  ) {
    const api = `${this.api}/repos/${r.fullName}/actions/runs/${run.id}`;
    const repoRef = { id: r.id, url: `${this.api}/repos/${r.fullName}`, name: r.name };
    const person = (p?: { name: string; email: string }) => ({ name: p?.name ?? "", email: p?.email ?? "" });
    return {
      id: run.id,
      name: run.name,
      node_id: this.nodeId("WorkflowRun", run.id),
      check_suite_id: run.id + 1,
      check_suite_node_id: this.nodeId("CheckSuite", run.id + 1),
      head_branch: run.headBranch,
      head_sha: run.headSha,
      path: run.workflowPath,
      display_title: run.displayTitle ?? run.name,
      run_number: run.runNumber,
      event: run.event,
      status: run.status,
      conclusion: run.conclusion,
      workflow_id: run.workflowId,
      url: api,
      html_url: `${this.html}/${r.fullName}/actions/runs/${run.id}`,
      pull_requests: pulls.map((p) => ({
        url: `${this.api}/repos/${r.fullName}/pulls/${p.number}`,
        id: p.id,
        number: p.number,
        head: { ref: p.headRef, sha: p.headSha, repo: repoRef },
        base: { ref: p.baseRef, sha: p.baseSha, repo: repoRef },
      })),
      created_at: run.createdAt,
      updated_at: run.updatedAt,
      actor: this.user(run.actor),
      triggering_actor: this.user(run.triggeringActor ?? run.actor),
      run_attempt: run.runAttempt ?? 1,
      referenced_workflows: [],
      run_started_at: run.runStartedAt,
      jobs_url: `${api}/jobs`,
      logs_url: `${api}/logs`,
      check_suite_url: `${this.api}/repos/${r.fullName}/check-suites/${run.id + 1}`,
      artifacts_url: `${api}/artifacts`,
      cancel_url: `${api}/cancel`,
      rerun_url: `${api}/rerun`,
      previous_attempt_url: null,
      workflow_url: `${this.api}/repos/${r.fullName}/actions/workflows/${run.workflowId}`,
      head_commit: headCommit
        ? {
            id: headCommit.sha,
            tree_id: headCommit.tree,
            message: headCommit.message,
            timestamp: headCommit.committer.date,
            author: person(headCommit.author),
            committer: person(headCommit.committer),
          }
        : null,
      repository: repoLite(repoJson),
      head_repository: repoLite(repoJson),
    };
  }

  workflowJob(r: Repo, run: WorkflowRun) {
    const api = `${this.api}/repos/${r.fullName}/actions/jobs/${run.jobId}`;
    const started = run.status === "queued" ? null : run.runStartedAt;
    return {
      id: run.jobId,
      run_id: run.id,
      run_url: `${this.api}/repos/${r.fullName}/actions/runs/${run.id}`,
      run_attempt: run.runAttempt ?? 1,
      node_id: this.nodeId("CheckRun", run.jobId),
      head_sha: run.headSha,
      url: api,
      html_url: `${this.html}/${r.fullName}/actions/runs/${run.id}/job/${run.jobId}`,
      status: run.status,
      conclusion: run.conclusion,
      created_at: run.createdAt,
      started_at: started ?? run.createdAt,
      completed_at: run.status === "completed" ? run.updatedAt : null,
      name: "job",
      steps: [],
      check_run_url: `${this.api}/repos/${r.fullName}/check-runs/${run.jobId}`,
      labels: ["self-hosted"],
      runner_id: run.status === "queued" ? null : 1,
      runner_name: run.status === "queued" ? null : "emulated-runner",
      runner_group_id: run.status === "queued" ? null : 1,
      runner_group_name: run.status === "queued" ? null : "Default",
      workflow_name: run.name,
      head_branch: run.headBranch,
    };
  }
}

// The subset of repository fields GitHub sends where it embeds a "repository lite".
const liteKeys = [
  "id",
  "node_id",
  "name",
  "full_name",
  "private",
  "owner",
  "html_url",
  "description",
  "fork",
  "url",
  "forks_url",
  "keys_url",
  "collaborators_url",
  "teams_url",
  "hooks_url",
  "issue_events_url",
  "events_url",
  "assignees_url",
  "branches_url",
  "tags_url",
  "blobs_url",
  "git_tags_url",
  "git_refs_url",
  "trees_url",
  "statuses_url",
  "languages_url",
  "stargazers_url",
  "contributors_url",
  "subscribers_url",
  "subscription_url",
  "commits_url",
  "git_commits_url",
  "comments_url",
  "issue_comment_url",
  "contents_url",
  "compare_url",
  "merges_url",
  "archive_url",
  "downloads_url",
  "issues_url",
  "pulls_url",
  "milestones_url",
  "notifications_url",
  "labels_url",
  "releases_url",
  "deployments_url",
];

export function repoLite(repoJson: unknown): Record<string, unknown> {
  const full = repoJson as Record<string, unknown>;
  return Object.fromEntries(liteKeys.map((k) => [k, full[k]]));
}
