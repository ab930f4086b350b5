import { HttpError } from "../http-error.ts";
import {
  canTriage,
  editTitleAndBody,
  issueEvent,
  issuePayload,
  labelNames,
  labelOf,
  newIssue,
  recordLabelEvent,
  replaceLabels,
  restIssue,
  setAssignees,
  setIssueState,
  storeIssue,
} from "../issue-changes.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { type Issue, nowIso } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Issues: create, list, get, update (https://docs.github.com/en/rest/issues/issues). */
export function registerIssueRoutes(r: Router, w: World): void {
  r.on("POST /repos/{owner}/{repo}/issues", (ctx) => createIssue(w, ctx));
  r.on("GET /repos/{owner}/{repo}/issues", (ctx) => listIssues(w, ctx));
  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}", (ctx) => {
    const repo = w.repo(ctx);
    return { status: 200, body: restIssue(w, repo, w.issue(repo, ctx.params.issue_number)) };
  });
  r.on("PATCH /repos/{owner}/{repo}/issues/{issue_number}", (ctx) => updateIssue(w, ctx));
}

function createIssue(w: World, ctx: Ctx): Reply {
  const repo = w.repo(ctx);
  const b = ctx.body as Body;
  const i = newIssue(w, repo, {
    title: String(b.title),
    body: (b.body as string | undefined) ?? null,
    user: w.actingUser(ctx),
  });
  storeIssue(w, repo, i);
  const assignees = [...((b.assignees as string[]) ?? []), ...(b.assignee ? [String(b.assignee)] : [])];
  // Without triage rights GitHub drops labels and assignees instead of failing.
  if (canTriage(w, ctx, repo)) {
    for (const n of labelNames(b.labels)) {
      const l = labelOf(w, repo, n);
      if (!i.labels.includes(l.name)) i.labels.push(l.name);
    }
    for (const a of assignees) {
      if (w.state.users.has(a.toLowerCase()) && w.state.permission(repo, a) !== "none")
        i.assignees.push(w.state.user(a).login);
    }
  }
  w.emit(repo, "issues", { action: "opened", issue: w.issueJson(repo, i) });
  for (const n of i.labels) {
    recordLabelEvent(w, repo, i, "labeled", n);
    w.emit(repo, "issues", {
      action: "labeled",
      issue: w.issueJson(repo, i),
      label: w.shapes.label(repo, repo.labels.get(n.toLowerCase())!),
    });
  }
  return {
    status: 201,
    body: restIssue(w, repo, i),
    headers: { location: `${w.shapes.api}/repos/${repo.fullName}/issues/${i.number}` },
  };
}

function listIssues(w: World, ctx: Ctx): Reply {
  const repo = w.repo(ctx);
  const state = String(ctx.params.state ?? "open");
  const wanted = ctx.params.labels
    ? String(ctx.params.labels)
        .split(",")
        .map((s) => s.trim().toLowerCase())
    : [];
  const direction = String(ctx.params.direction ?? "desc");
  const sort = String(ctx.params.sort ?? "created");
  let list = [...repo.issues.values()].filter(
    (i) =>
      (state === "all" || i.state === state) &&
      wanted.every((l) => i.labels.some((x) => x.toLowerCase() === l)) &&
      (!ctx.params.assignee || i.assignees.includes(String(ctx.params.assignee))) &&
      (!ctx.params.creator || i.user.login === String(ctx.params.creator)) &&
      (!ctx.params.since || i.updatedAt >= String(ctx.params.since)),
  );
  const key = (i: Issue) =>
    sort === "updated"
      ? i.updatedAt
      : sort === "comments"
        ? String(i.comments.length).padStart(9, "0")
        : i.createdAt;
  list = list.sort((a, b) => (key(a) === key(b) ? a.number - b.number : key(a) < key(b) ? -1 : 1));
  if (direction === "desc") list.reverse();
  return paginate(
    ctx,
    w.shapes.api,
    list.map((i) => restIssue(w, repo, i)),
  );
}

function updateIssue(w: World, ctx: Ctx): Reply {
  const repo = w.repo(ctx);
  const i = w.issue(repo, ctx.params.issue_number);
  const by = w.actingUser(ctx);
  const b = ctx.body as Body;
  const triage = canTriage(w, ctx, repo);
  if (!triage && by.login !== i.user.login)
    throw new HttpError(403, "Must have triage access to edit this issue");
  const changes = editTitleAndBody(i, b);
  if (Object.keys(changes).length > 0) {
    i.updatedAt = nowIso();
    w.emit(repo, issueEvent(i), { action: "edited", ...issuePayload(w, repo, i), changes });
  }
  if (triage && Array.isArray(b.labels)) replaceLabels(w, repo, i, labelNames(b.labels));
  if (triage && (Array.isArray(b.assignees) || "assignee" in b)) {
    const next = Array.isArray(b.assignees)
      ? (b.assignees as string[])
      : b.assignee
        ? [String(b.assignee)]
        : [];
    const gone = i.assignees.filter((a) => !next.some((n) => n.toLowerCase() === a.toLowerCase()));
    setAssignees(w, repo, i, next, gone);
  }
  if (typeof b.state === "string")
    setIssueState(w, repo, i, b.state, b.state_reason as string | null | undefined, by);
  return { status: 200, body: restIssue(w, repo, i) };
}
