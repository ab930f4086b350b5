import { notFound, validationFailed } from "../http-error.ts";
import { restIssue } from "../issue-changes.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { paginate, type World } from "../world.ts";

/** Sub-issues and an issue's parent (https://docs.github.com/en/rest/issues/sub-issues). */
export function registerSubIssueRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const subs = i.subIssues.map((id) => w.state.issuesById.get(id)!).filter(Boolean);
    return paginate(
      ctx,
      w.shapes.api,
      subs.map((s) => restIssue(w, s.repo, s.issue)),
    );
  });

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", (ctx) => addSubIssue(w, ctx));

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/sub_issue", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const parent = w.issue(repo, ctx.params.issue_number);
    const id = Number((ctx.body as Body).sub_issue_id);
    if (!parent.subIssues.includes(id)) throw notFound();
    parent.subIssues = parent.subIssues.filter((x) => x !== id);
    const sub = w.state.issuesById.get(id);
    if (sub) sub.issue.parent = undefined;
    return { status: 200, body: restIssue(w, repo, sub?.issue ?? parent) };
  });

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/parent", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const p = i.parent !== undefined ? w.state.issuesById.get(i.parent) : undefined;
    if (!p) throw notFound();
    return { status: 200, body: restIssue(w, p.repo, p.issue) };
  });
}

const refused = (message: string) => validationFailed([{ resource: "Issue", code: "custom", message }]);

function addSubIssue(w: World, ctx: Ctx): Reply {
  const repo = w.repo(ctx, "triage");
  const parent = w.issue(repo, ctx.params.issue_number);
  const b = ctx.body as Body;
  const sub = w.state.issuesById.get(Number(b.sub_issue_id));
  if (!sub || sub.repo.owner !== repo.owner) throw notFound();
  if (sub.issue === parent) throw refused("An issue cannot be its own sub-issue");
  if (parent.subIssues.includes(sub.issue.id)) throw refused("Sub-issue already exists");
  if (sub.issue.parent !== undefined) {
    if (b.replace_parent !== true)
      throw refused("Issue may not contain duplicate sub-issues, or already have a parent");
    const old = w.state.issuesById.get(sub.issue.parent)?.issue;
    if (old) old.subIssues = old.subIssues.filter((id) => id !== sub.issue.id);
  }
  parent.subIssues.push(sub.issue.id);
  sub.issue.parent = parent.id;
  return { status: 201, body: restIssue(w, repo, parent) };
}
