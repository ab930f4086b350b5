import type { Ctx } from "./router.ts";
import { atLeast, type Issue, type Label, nowIso, type Repo, type User } from "./state.ts";
import type { World } from "./world.ts";

/**
 * What happens to an issue (or a pull request, which is an issue too) when it is opened, labelled,
 * assigned, closed or reopened: the state change and the webhooks GitHub sends for it. Shared by the
 * issue, label, assignee and sub-issue routes.
 */

/** Labels arrive as names or `{name}` objects. */
export function labelNames(v: unknown): string[] {
  if (!Array.isArray(v)) return [];
  return v
    .map((x) => (typeof x === "string" ? x : String((x as { name?: unknown }).name ?? "")))
    .filter(Boolean);
}

/** The repository's label of that name; GitHub creates unknown labels when they are applied to an issue. */
export function labelOf(w: World, repo: Repo, name: string): Label {
  const key = name.toLowerCase();
  let l = repo.labels.get(key);
  if (!l) {
    l = { id: w.state.nextId(), name, color: "ededed", description: null, default: false };
    repo.labels.set(key, l);
  }
  return l;
}

/** Whether the caller may label, assign and edit others' issues (the installation always may). */
export function canTriage(w: World, ctx: Ctx, repo: Repo): boolean {
  if (ctx.actor.kind === "installation") return true;
  if (ctx.actor.kind !== "user") return false;
  return atLeast(w.state.permission(repo, ctx.actor.user.login), "triage");
}

/** A new open issue (a pull request when `pull` is given), numbered but not yet stored. */
export function newIssue(
  w: World,
  repo: Repo,
  fields: Pick<Issue, "title" | "body" | "user"> & Pick<Partial<Issue>, "pull">,
): Issue {
  const now = nowIso();
  return {
    id: w.state.nextId(),
    number: repo.nextNumber++,
    state: "open",
    stateReason: null,
    labels: [],
    assignees: [],
    comments: [],
    createdAt: now,
    updatedAt: now,
    closedAt: null,
    closedBy: null,
    locked: false,
    subIssues: [],
    ...fields,
  };
}

/** Applies a `title` and `body` edit (issue or pull request); the `changes` an `edited` webhook reports. */
export function editTitleAndBody(i: Issue, b: Record<string, unknown>): Record<string, unknown> {
  const changes: Record<string, unknown> = {};
  if (typeof b.title === "string" && b.title !== i.title) {
    changes.title = { from: i.title };
    i.title = b.title;
  }
  if ("body" in b && b.body !== i.body) {
    changes.body = { from: i.body ?? "" };
    i.body = (b.body as string | null) ?? null;
  }
  return changes;
}

/** Stores a new issue under its number and its id. */
export function storeIssue(w: World, repo: Repo, i: Issue): void {
  repo.issues.set(i.number, i);
  w.state.issuesById.set(i.id, { repo, issue: i });
}

/** The issue as the REST API answers it (webhooks carry `w.issueJson`). */
export function restIssue(w: World, repo: Repo, i: Issue) {
  return {
    ...w.issueJson(repo, i),
    closed_by: i.closedBy ? w.shapes.user(i.closedBy) : null,
    sub_issues_summary: {
      total: i.subIssues.length,
      completed: i.subIssues.filter((id) => w.state.issuesById.get(id)?.issue.state === "closed").length,
      percent_completed: 0,
    },
  };
}

/** The issue's labels as the REST API lists them. */
export function issueLabels(w: World, repo: Repo, i: Issue) {
  return i.labels
    .map((n) => repo.labels.get(n.toLowerCase()))
    .filter((l): l is Label => !!l)
    .map((l) => w.shapes.label(repo, l));
}

/** What a webhook about the issue carries: the issue, or the pull request and its number. */
export const issuePayload = (w: World, repo: Repo, i: Issue) =>
  i.pull ? { number: i.number, pull_request: w.pullJsonSync(repo, i) } : { issue: w.issueJson(repo, i) };
/** The webhook event about an issue: `issues`, or `pull_request` for a pull request. */
export const issueEvent = (i: Issue) => (i.pull ? "pull_request" : "issues");

/** Remembers a label change and who made it, for the issue events API. */
export function recordLabelEvent(
  w: World,
  repo: Repo,
  i: Issue,
  event: "labeled" | "unlabeled",
  label: string,
) {
  i.events ??= [];
  i.events.push({ id: w.state.nextId(), event, actor: w.currentUser(repo), label, createdAt: nowIso() });
}

export function addLabels(w: World, repo: Repo, i: Issue, names: string[]): void {
  for (const name of names) {
    const l = labelOf(w, repo, name);
    if (i.labels.some((x) => x.toLowerCase() === l.name.toLowerCase())) continue;
    i.labels.push(l.name);
    i.updatedAt = nowIso();
    recordLabelEvent(w, repo, i, "labeled", l.name);
    w.emit(repo, issueEvent(i), {
      action: "labeled",
      ...issuePayload(w, repo, i),
      label: w.shapes.label(repo, l),
    });
  }
}

export function removeLabel(w: World, repo: Repo, i: Issue, name: string): boolean {
  const idx = i.labels.findIndex((x) => x.toLowerCase() === name.toLowerCase());
  if (idx < 0) return false;
  const [removed] = i.labels.splice(idx, 1);
  i.updatedAt = nowIso();
  recordLabelEvent(w, repo, i, "unlabeled", removed!);
  const l = repo.labels.get(removed!.toLowerCase());
  w.emit(repo, issueEvent(i), {
    action: "unlabeled",
    ...issuePayload(w, repo, i),
    ...(l ? { label: w.shapes.label(repo, l) } : {}),
  });
  return true;
}

/** Makes `next` the issue's labels: removes the others, then adds what is missing. */
export function replaceLabels(w: World, repo: Repo, i: Issue, next: string[]): void {
  for (const old of [...i.labels])
    if (!next.some((n) => n.toLowerCase() === old.toLowerCase())) removeLabel(w, repo, i, old);
  addLabels(w, repo, i, next);
}

export function setAssignees(w: World, repo: Repo, i: Issue, add: string[], remove: string[]): void {
  for (const login of remove) {
    const idx = i.assignees.findIndex((a) => a.toLowerCase() === login.toLowerCase());
    if (idx < 0) continue;
    i.assignees.splice(idx, 1);
    w.emit(repo, issueEvent(i), {
      action: "unassigned",
      ...issuePayload(w, repo, i),
      assignee: w.shapes.user(w.state.user(login)),
    });
  }
  for (const login of add) {
    if (i.assignees.some((a) => a.toLowerCase() === login.toLowerCase())) continue;
    // GitHub silently drops assignees who cannot be assigned (no access).
    if (w.state.permission(repo, login) === "none" || !w.state.users.has(login.toLowerCase())) continue;
    i.assignees.push(w.state.user(login).login);
    w.emit(repo, issueEvent(i), {
      action: "assigned",
      ...issuePayload(w, repo, i),
      assignee: w.shapes.user(w.state.user(login)),
    });
  }
}

/** Closes or reopens an issue and sends `closed` / `reopened`. */
export function setIssueState(
  w: World,
  repo: Repo,
  i: Issue,
  state: string,
  reason: string | null | undefined,
  by: User,
): void {
  if (state === i.state) return;
  const now = nowIso();
  i.state = state as Issue["state"];
  i.updatedAt = now;
  if (state === "closed") {
    i.closedAt = now;
    i.closedBy = by;
    i.stateReason = reason ?? "completed";
    w.emit(repo, issueEvent(i), { action: "closed", ...issuePayload(w, repo, i) });
  } else {
    i.closedAt = null;
    i.closedBy = null;
    i.stateReason = "reopened";
    w.emit(repo, issueEvent(i), { action: "reopened", ...issuePayload(w, repo, i) });
  }
}
