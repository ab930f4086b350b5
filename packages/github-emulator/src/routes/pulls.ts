import { noreplyIdentity } from "../authors.ts";
import { HttpError, notFound, validationFailed } from "../http-error.ts";
import { editTitleAndBody, newIssue, storeIssue } from "../issue-changes.ts";
import { findPull, headBranchOf, refreshPull } from "../pull-requests.ts";
import type { OnRefMoved } from "../ref-events.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { type Issue, nowIso, type Repo } from "../state.ts";
import { paginate, type World } from "../world.ts";
import { commitJson } from "./commits.ts";

/**
 * Pull requests: open, list, read, edit, merge (a real merge commit), their commits and files
 * (https://docs.github.com/en/rest/pulls/pulls).
 */
export function registerPullRoutes(r: Router, w: World, onRefMoved: OnRefMoved): void {
  r.on("POST /repos/{owner}/{repo}/pulls", (ctx) => createPull(w, ctx));
  r.on("GET /repos/{owner}/{repo}/pulls", (ctx) => listPulls(w, ctx));
  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}", async (ctx) => {
    const repo = w.repo(ctx);
    const i = findPull(repo, ctx.params.pull_number);
    if (i.state === "open") await refreshPull(repo, i);
    return { status: 200, body: w.pullJsonSync(repo, i) };
  });
  r.on("PATCH /repos/{owner}/{repo}/pulls/{pull_number}", (ctx) => updatePull(w, ctx));
  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/merge", (ctx) => {
    const repo = w.repo(ctx);
    if (!findPull(repo, ctx.params.pull_number).pull!.merged) throw notFound();
    return { status: 204 };
  });
  r.on("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge", (ctx) => mergePull(w, ctx, onRefMoved));
  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/commits", async (ctx) => {
    const repo = w.repo(ctx);
    const p = findPull(repo, ctx.params.pull_number).pull!;
    const shas = (await repo.git.revList(["--reverse", `${p.baseSha}..${p.headSha}`])).slice(0, 250);
    const list = [];
    for (const sha of shas) list.push(await commitJson(w, repo, sha));
    return paginate(ctx, w.shapes.api, list);
  });
  r.on("GET /repos/{owner}/{repo}/pulls/{pull_number}/files", async (ctx) => {
    const repo = w.repo(ctx);
    const p = findPull(repo, ctx.params.pull_number).pull!;
    const mb = (await repo.git.mergeBase(p.baseSha, p.headSha)) ?? p.baseSha;
    const files = await repo.git.changedFiles(mb, p.headSha);
    const listed = [];
    for (const f of files)
      listed.push({ ...w.shapes.diffFile(p.headSha, f), ...(await patchOf(repo, mb, p.headSha, f.path)) });
    return paginate(ctx, w.shapes.api, listed);
  });
}

/**
 * A file's `patch` as GitHub lists it (https://docs.github.com/en/rest/pulls/pulls#list-pull-requests-files):
 * the unified diff's hunks from the first `@@`, without the file headers; none for a binary file.
 */
async function patchOf(
  repo: { git: { git(args: string[], opts: { reject: boolean }): Promise<{ stdout: string }> } },
  base: string,
  head: string,
  path: string,
): Promise<{ patch?: string; additions: number; deletions: number; changes: number }> {
  const diff = (
    await repo.git.git(["diff", "--no-renames", "-U3", base, head, "--", path], { reject: false })
  ).stdout;
  const at = diff.indexOf("\n@@");
  if (at < 0) return { additions: 0, deletions: 0, changes: 0 };
  const patch = diff.slice(at + 1).replace(/\n$/, "");
  const lines = patch.split("\n");
  const additions = lines.filter((l) => l.startsWith("+")).length;
  const deletions = lines.filter((l) => l.startsWith("-")).length;
  return { patch, additions, deletions, changes: additions + deletions };
}

const custom = (message: string) => validationFailed([{ resource: "PullRequest", code: "custom", message }]);
const invalid = (field: string) => validationFailed([{ resource: "PullRequest", field, code: "invalid" }]);

/** The branches a new pull request would join, checked as GitHub checks them. */
async function pullBranches(repo: Repo, b: Body) {
  const headBranch = headBranchOf(repo, String(b.head));
  const baseBranch = String(b.base);
  if (!headBranch) throw invalid("head");
  const headSha = await repo.git.resolveRef(`refs/heads/${headBranch}`);
  if (!headSha) throw invalid("head");
  const baseSha = await repo.git.resolveRef(`refs/heads/${baseBranch}`);
  if (!baseSha) throw invalid("base");
  for (const i of repo.issues.values()) {
    if (i.pull && i.state === "open" && i.pull.headRef === headBranch && i.pull.baseRef === baseBranch)
      throw custom(`A pull request already exists for ${repo.owner.login}:${headBranch}.`);
  }
  if ((await repo.git.revList([`${baseSha}..${headSha}`])).length === 0)
    throw custom(`No commits between ${baseBranch} and ${headBranch}`);
  return { headBranch, headSha, baseBranch, baseSha };
}

async function createPull(w: World, ctx: Ctx): Promise<Reply> {
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
  const { headBranch, headSha, baseBranch, baseSha } = await pullBranches(repo, b);
  const i = newIssue(w, repo, {
    title: String(b.title ?? headBranch),
    body: (b.body as string | undefined) ?? null,
    user: by,
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
  });
  await refreshPull(repo, i);
  storeIssue(w, repo, i);
  w.emit(repo, "pull_request", { action: "opened", number: i.number, pull_request: w.pullJsonSync(repo, i) });
  await w.workflowTriggers?.pullRequest(repo, i, "opened");
  return {
    status: 201,
    body: w.pullJsonSync(repo, i),
    headers: { location: `${w.shapes.api}/repos/${repo.fullName}/pulls/${i.number}` },
  };
}

function listPulls(w: World, ctx: Ctx): Reply {
  const repo = w.repo(ctx);
  const state = String(ctx.params.state ?? "open");
  const head = ctx.params.head ? headBranchOf(repo, String(ctx.params.head)) : undefined;
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
}

async function updatePull(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx);
  const i = findPull(repo, ctx.params.pull_number);
  const by = w.actingUser(ctx);
  const b = ctx.body as Body;
  const perm = ctx.actor.kind === "user" ? w.state.permission(repo, by.login) : "write";
  if (by.login !== i.user.login && !["admin", "maintain", "write"].includes(perm))
    throw new HttpError(403, "Must have push access to edit this pull request");
  const changes = editTitleAndBody(i, b);
  if (typeof b.base === "string" && b.base !== i.pull!.baseRef) {
    if (!(await repo.git.resolveRef(`refs/heads/${b.base}`))) throw invalid("base");
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
  if (typeof b.state === "string" && b.state !== i.state && !i.pull!.merged)
    await setPullState(w, repo, i, b.state);
  return { status: 200, body: w.pullJsonSync(repo, i) };
}

/** Closes or reopens a pull request (a reopened one starts its `pull_request` runs again). */
async function setPullState(w: World, repo: Repo, i: Issue, state: string): Promise<void> {
  const now = nowIso();
  i.state = state as Issue["state"];
  i.updatedAt = now;
  i.closedAt = state === "closed" ? now : null;
  if (state === "open") await refreshPull(repo, i);
  w.emit(repo, "pull_request", {
    action: state === "closed" ? "closed" : "reopened",
    number: i.number,
    pull_request: w.pullJsonSync(repo, i),
  });
  if (state === "open") await w.workflowTriggers?.pullRequest(repo, i, "reopened");
}

/** The merge commit's title and message, as GitHub writes them for each merge method. */
function mergeMessage(repo: Repo, i: Issue, b: Body, method: string): string {
  const title =
    (b.commit_title as string | undefined) ??
    (method === "merge"
      ? `Merge pull request #${i.number} from ${repo.owner.login}/${i.pull!.headRef}`
      : `${i.title} (#${i.number})`);
  if (b.commit_message) return `${title}\n\n${String(b.commit_message)}`;
  return method === "merge" ? `${title}\n\n${i.title}` : title;
}

function mergePull(w: World, ctx: Ctx, onRefMoved: OnRefMoved): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const i = findPull(repo, ctx.params.pull_number);
  const b = (ctx.body as Body | undefined) ?? {};
  const by = w.actingUser(ctx);
  const p = i.pull!;
  return repo.git.exclusive(async () => {
    await refreshPull(repo, i);
    if (p.merged || i.state !== "open") throw new HttpError(405, "Pull Request is not mergeable");
    if (p.draft) throw new HttpError(405, "Pull Request is still a draft");
    if (b.sha !== undefined && String(b.sha) !== p.headSha)
      throw new HttpError(409, "Head branch was modified. Review and try the merge again.");
    const merge = await repo.git.mergeTree(p.baseSha, p.headSha);
    if (!("tree" in merge)) throw new HttpError(405, "Pull Request is not mergeable");
    const method = String(b.merge_method ?? "merge");
    // Squash and rebase both land as one new commit on the base here; only merge keeps two parents.
    const sha = await repo.git.commitTree({
      tree: merge.tree,
      parents: method === "merge" ? [p.baseSha, p.headSha] : [p.baseSha],
      message: mergeMessage(repo, i, b, method),
      author: noreplyIdentity(by),
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
    w.emit(repo, "pull_request", {
      action: "closed",
      number: i.number,
      pull_request: w.pullJsonSync(repo, i),
    });
    await onRefMoved(repo, ref, p.baseSha, sha);
    return { status: 200, body: { sha, merged: true, message: "Pull Request successfully merged" } };
  });
}
