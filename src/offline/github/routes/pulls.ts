import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import { type Issue, nowIso, type Repo, type Review } from "../state.ts";
import { paginate, type World } from "../world.ts";
import { publishInlineComments, readReviewCommentInputs } from "./review-comments.ts";

type Body = Record<string, unknown>;

/** Recomputes a PR's head/base shas and diff figures from git. */
export async function refreshPull(repo: Repo, i: Issue): Promise<void> {
  const p = i.pull!;
  if (p.merged) return;
  const head = await repo.git.resolveRef(`refs/heads/${p.headRef}`);
  const base = await repo.git.resolveRef(`refs/heads/${p.baseRef}`);
  if (head) p.headSha = head;
  if (base) p.baseSha = base;
  if (!head || !base) {
    p.stats = { ...p.stats, mergeable: false };
    return;
  }
  const commits = (await repo.git.revList([`${base}..${head}`])).length;
  const mb = (await repo.git.mergeBase(base, head)) ?? base;
  const numstat = (await repo.git.git(["diff", "--no-renames", "--numstat", mb, head])).stdout;
  let additions = 0;
  let deletions = 0;
  let changedFiles = 0;
  for (const line of numstat.split("\n").filter(Boolean)) {
    const [a, d] = line.split("\t");
    additions += Number(a) || 0;
    deletions += Number(d) || 0;
    changedFiles += 1;
  }
  const merge = await repo.git.mergeTree(base, head);
  p.stats = { commits, additions, deletions, changedFiles, mergeable: "tree" in merge };
}

/** Pull requests: open, list, read, edit, merge (a real merge commit), reviews. */
export function registerPullRoutes(
  r: Router,
  w: World,
  onRefMoved: (repo: Repo, ref: string, before: string | null, after: string | null) => Promise<void>,
): void {
  const pull = (repo: Repo, n: unknown): Issue => {
    const i = repo.issues.get(Number(n));
    if (!i?.pull) throw notFound();
    return i;
  };
  const branchOf = (repo: Repo, head: string) => {
    const idx = head.indexOf(":");
    if (idx < 0) return head;
    // Forks are not emulated: `owner:branch` must name this repository's owner.
    if (head.slice(0, idx).toLowerCase() !== repo.owner.login.toLowerCase()) return undefined;
    return head.slice(idx + 1);
  };

  r.on("POST /repos/{owner}/{repo}/pulls", async (ctx) => {
    const repo = w.repo(ctx);
    const by = w.actingUser(ctx);
    // A GITHUB_TOKEN may open pull requests only where the repository allows it (off by default):
    // https://docs.github.com/en/repositories/managing-your-repositorys-settings-and-features/enabling-features-for-your-repository/managing-github-actions-settings-for-a-repository#preventing-github-actions-from-creating-or-approving-pull-requests
    if (
      ctx.actor.kind === "installation" &&
      ctx.actor.workflow &&
      !repo.actionsSettings.canApprovePullRequestReviews
    )
      throw new HttpError(403, "GitHub Actions is not permitted to create or approve pull requests.", {
        documentation_url: "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
      });
    const b = ctx.body as Body;
    const headBranch = branchOf(repo, String(b.head));
    const baseBranch = String(b.base);
    const invalid = (field: string) =>
      validationFailed([{ resource: "PullRequest", field, code: "invalid" }]);
    if (!headBranch) throw invalid("head");
    const headSha = await repo.git.resolveRef(`refs/heads/${headBranch}`);
    if (!headSha) throw invalid("head");
    const baseSha = await repo.git.resolveRef(`refs/heads/${baseBranch}`);
    if (!baseSha) throw invalid("base");
    for (const i of repo.issues.values()) {
      if (i.pull && i.state === "open" && i.pull.headRef === headBranch && i.pull.baseRef === baseBranch) {
        throw validationFailed([
          {
            resource: "PullRequest",
            code: "custom",
            message: `A pull request already exists for ${repo.owner.login}:${headBranch}.`,
          },
        ]);
      }
    }
    if ((await repo.git.revList([`${baseSha}..${headSha}`])).length === 0) {
      throw validationFailed([
        {
          resource: "PullRequest",
          code: "custom",
          message: `No commits between ${baseBranch} and ${headBranch}`,
        },
      ]);
    }
    const now = nowIso();
    const i: Issue = {
      id: w.state.nextId(),
      number: repo.nextNumber++,
      title: String(b.title ?? headBranch),
      body: (b.body as string | undefined) ?? null,
      state: "open",
      stateReason: null,
      user: by,
      labels: [],
      assignees: [],
      comments: [],
      createdAt: now,
      updatedAt: now,
      closedAt: null,
      closedBy: null,
      locked: false,
      subIssues: [],
      pull: {
        headRef: headBranch,
        headSha,
        baseRef: baseBranch,
        baseSha,
        draft: b.draft === true,
        merged: false,
        mergedAt: null,
        mergedBy: null,
        mergeCommitSha: null,
        maintainerCanModify: b.maintainer_can_modify !== false,
        reviews: [],
        stats: { commits: 0, additions: 0, deletions: 0, changedFiles: 0, mergeable: null },
      },
    };
    await refreshPull(repo, i);
    repo.issues.set(i.number, i);
    w.state.issuesById.set(i.id, { repo, issue: i });
    w.emit(repo, "pull_request", {
      action: "opened",
      number: i.number,
      pull_request: w.pullJsonSync(repo, i),
    });
    await w.workflowTriggers?.pullRequest(repo, i, "opened");
    return {
      status: 201,
      body: w.pullJsonSync(repo, i),
      headers: { location: `${w.shapes.api}/repos/${repo.fullName}/pulls/${i.number}` },
    };
  });

  r.on("GET /repos/{owner}/{repo}/pulls", (ctx) => {
    const repo = w.repo(ctx);
    const state = String(ctx.params.state ?? "open");
    const head = ctx.params.head ? branchOf(repo, String(ctx.params.head)) : undefined;
    const base = ctx.params.base ? String(ctx.params.base) : undefined;
    let list = [...repo.issues.values()].filter(
      (i) =>
        i.pull &&
        (state === "all" || i.state === state) &&
        (!ctx.params.head || i.pull.headRef === head) &&
        (!base || i.pull.baseRef === base),
    );
    list = list.sort((a, b) => a.number - b.number);
    if (String(ctx.params.direction ?? "desc") === "desc") list.reverse();
    return paginate(
      ctx,
      w.shapes.api,
      list.map((i) => w.pullJsonSync(repo, i)),
    );
  });

  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}", async (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    if (i.state === "open") await refreshPull(repo, i);
    return { status: 200, body: w.pullJsonSync(repo, i) };
  });

  r.on("PATCH /repos/{owner}/{repo}/pulls/{pull_number}", async (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    const by = w.actingUser(ctx);
    const b = ctx.body as Body;
    const perm = ctx.actor.kind === "user" ? w.state.permission(repo, by.login) : "write";
    if (by.login !== i.user.login && !["admin", "maintain", "write"].includes(perm))
      throw new HttpError(403, "Must have push access to edit this pull request");
    const changes: Record<string, unknown> = {};
    if (typeof b.title === "string" && b.title !== i.title) {
      changes.title = { from: i.title };
      i.title = b.title;
    }
    if ("body" in b && b.body !== i.body) {
      changes.body = { from: i.body ?? "" };
      i.body = (b.body as string | null) ?? null;
    }
    if (typeof b.base === "string" && b.base !== i.pull!.baseRef) {
      if (!(await repo.git.resolveRef(`refs/heads/${b.base}`)))
        throw validationFailed([{ resource: "PullRequest", field: "base", code: "invalid" }]);
      changes.base = { ref: { from: i.pull!.baseRef }, sha: { from: i.pull!.baseSha } };
      i.pull!.baseRef = b.base;
      await refreshPull(repo, i);
    }
    if (Object.keys(changes).length) {
      i.updatedAt = nowIso();
      w.emit(repo, "pull_request", {
        action: "edited",
        number: i.number,
        pull_request: w.pullJsonSync(repo, i),
        changes,
      });
    }
    if (typeof b.state === "string" && b.state !== i.state && !i.pull!.merged) {
      const now = nowIso();
      i.state = b.state as Issue["state"];
      i.updatedAt = now;
      i.closedAt = b.state === "closed" ? now : null;
      if (b.state === "open") await refreshPull(repo, i);
      w.emit(repo, "pull_request", {
        action: b.state === "closed" ? "closed" : "reopened",
        number: i.number,
        pull_request: w.pullJsonSync(repo, i),
      });
      if (b.state === "open") await w.workflowTriggers?.pullRequest(repo, i, "reopened");
    }
    return { status: 200, body: w.pullJsonSync(repo, i) };
  });

  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/merge", (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    if (!i.pull!.merged) throw notFound();
    return { status: 204 };
  });

  r.on("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const i = pull(repo, ctx.params.pull_number);
    const b = (ctx.body as Body | undefined) ?? {};
    const by = w.actingUser(ctx);
    const p = i.pull!;
    return repo.git.exclusive(async () => {
      await refreshPull(repo, i);
      if (p.merged || i.state !== "open") throw new HttpError(405, "Pull Request is not mergeable");
      if (p.draft) throw new HttpError(405, "Pull Request is still a draft");
      if (b.sha !== undefined && String(b.sha) !== p.headSha) {
        throw new HttpError(409, "Head branch was modified. Review and try the merge again.");
      }
      const merge = await repo.git.mergeTree(p.baseSha, p.headSha);
      if (!("tree" in merge)) throw new HttpError(405, "Pull Request is not mergeable");
      const method = String(b.merge_method ?? "merge");
      const title =
        (b.commit_title as string | undefined) ??
        (method === "merge"
          ? `Merge pull request #${i.number} from ${repo.owner.login}/${p.headRef}`
          : `${i.title} (#${i.number})`);
      const message = b.commit_message
        ? `${title}\n\n${String(b.commit_message)}`
        : method === "merge"
          ? `${title}\n\n${i.title}`
          : title;
      const author = { name: by.login, email: `${by.id}+${by.login}@users.noreply.github.com` };
      // Squash and rebase both land as one new commit on the base here; only merge keeps two parents.
      const sha = await repo.git.commitTree({
        tree: merge.tree,
        parents: method === "merge" ? [p.baseSha, p.headSha] : [p.baseSha],
        message,
        author,
      });
      const ref = `refs/heads/${p.baseRef}`;
      if (!(await repo.git.updateRef(ref, sha, p.baseSha)))
        throw new HttpError(409, "Base branch was modified. Review and try the merge again.");
      const now = nowIso();
      p.merged = true;
      p.mergedAt = now;
      p.mergedBy = by;
      p.mergeCommitSha = sha;
      i.state = "closed";
      i.closedAt = now;
      i.updatedAt = now;
      const before = p.baseSha;
      w.emit(repo, "pull_request", {
        action: "closed",
        number: i.number,
        pull_request: w.pullJsonSync(repo, i),
      });
      await onRefMoved(repo, ref, before, sha);
      return { status: 200, body: { sha, merged: true, message: "Pull Request successfully merged" } };
    });
  });

  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/commits", async (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    const shas = (await repo.git.revList(["--reverse", `${i.pull!.baseSha}..${i.pull!.headSha}`])).slice(
      0,
      250,
    );
    const api = `${w.shapes.api}/repos/${repo.fullName}`;
    const list = [];
    for (const sha of shas) {
      const c = (await repo.git.readCommit(sha))!;
      list.push({
        sha,
        node_id: w.shapes.nodeId("Commit", 1),
        commit: {
          author: c.author,
          committer: c.committer,
          message: c.message,
          tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
          url: `${api}/git/commits/${sha}`,
          comment_count: 0,
        },
        url: `${api}/commits/${sha}`,
        html_url: `${w.shapes.html}/${repo.fullName}/commit/${sha}`,
        comments_url: `${api}/commits/${sha}/comments`,
        author: null,
        committer: null,
        parents: c.parents.map((x) => ({ sha: x, url: `${api}/commits/${x}` })),
      });
    }
    return paginate(ctx, w.shapes.api, list);
  });

  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/files", async (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    const mb = (await repo.git.mergeBase(i.pull!.baseSha, i.pull!.headSha)) ?? i.pull!.baseSha;
    const files = await repo.git.changedFiles(mb, i.pull!.headSha);
    const status = (s: string) => (s === "A" ? "added" : s === "D" ? "removed" : "modified");
    return paginate(
      ctx,
      w.shapes.api,
      files.map((f) => ({
        sha: i.pull!.headSha,
        filename: f.path,
        status: status(f.status),
        additions: 0,
        deletions: 0,
        changes: 0,
        blob_url: "",
        raw_url: "",
        contents_url: "",
      })),
    );
  });

  const reviewJson = (repo: Repo, i: Issue, rv: Review) => w.shapes.review(repo, i, rv, w.association(repo));

  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews", (ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    return paginate(
      ctx,
      w.shapes.api,
      i.pull!.reviews.map((rv) => reviewJson(repo, i, rv)),
    );
  });

  r.on("POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews", async (ctx: Ctx) => {
    const repo = w.repo(ctx);
    const i = pull(repo, ctx.params.pull_number);
    const by = w.actingUser(ctx);
    const b = (ctx.body as Body | undefined) ?? {};
    const event = String(b.event ?? "PENDING");
    const state =
      event === "APPROVE"
        ? "APPROVED"
        : event === "REQUEST_CHANGES"
          ? "CHANGES_REQUESTED"
          : event === "COMMENT"
            ? "COMMENTED"
            : "PENDING";
    if (by.login === i.user.login && state !== "COMMENTED" && state !== "PENDING") {
      throw validationFailed(
        [],
        `Unprocessable Entity: Can not ${event === "APPROVE" ? "approve" : "request changes on"} your own pull request`,
      );
    }
    if ((state === "CHANGES_REQUESTED" || state === "COMMENTED") && !b.body) {
      throw validationFailed(
        [],
        `Unprocessable Entity: Review Can not ${state === "COMMENTED" ? "comment" : "request changes"} without a body`,
      );
    }
    const commitId = String(b.commit_id ?? i.pull!.headSha);
    // Every inline comment is checked before anything is stored, as on GitHub.
    const inline = await readReviewCommentInputs(repo, i, commitId, b.comments);
    const rv: Review = {
      id: w.state.nextId(),
      user: by,
      body: String(b.body ?? ""),
      state,
      commitId,
      submittedAt: nowIso(),
    };
    i.pull!.reviews.push(rv);
    // A pending review's comments stay hidden until it is submitted (not emulated); others go out first.
    if (state !== "PENDING") publishInlineComments(w, repo, i, rv, inline);
    if (state !== "PENDING") {
      w.emit(repo, "pull_request_review", {
        action: "submitted",
        review: reviewJson(repo, i, rv),
        pull_request: w.simplePullJson(repo, i),
      });
    }
    return { status: 200, body: reviewJson(repo, i, rv) };
  });
}
