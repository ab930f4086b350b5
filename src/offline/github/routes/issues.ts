import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import { atLeast, type Issue, type Label, nowIso, type Repo, type User } from "../state.ts";
import { paginate, type World } from "../world.ts";

type Body = Record<string, unknown>;

/** Issues, issue comments, labels, assignees and sub-issues. */
export function registerIssueRoutes(r: Router, w: World): void {
  const labelOf = (repo: Repo, name: string): Label => {
    const key = name.toLowerCase();
    let l = repo.labels.get(key);
    if (!l) {
      // GitHub creates unknown labels on the fly when they are applied to an issue.
      l = { id: w.state.nextId(), name, color: "ededed", description: null, default: false };
      repo.labels.set(key, l);
    }
    return l;
  };

  const canTriage = (ctx: Ctx, repo: Repo): boolean => {
    if (ctx.actor.kind === "installation") return true;
    if (ctx.actor.kind !== "user") return false;
    return atLeast(w.state.permission(repo, ctx.actor.user.login), "triage");
  };

  const issuePayload = (repo: Repo, i: Issue) =>
    i.pull ? { number: i.number, pull_request: w.pullJsonSync(repo, i) } : { issue: w.issueJson(repo, i) };
  const issueEvent = (i: Issue) => (i.pull ? "pull_request" : "issues");

  const recordEvent = (repo: Repo, i: Issue, event: "labeled" | "unlabeled", label: string) => {
    i.events ??= [];
    i.events.push({ id: w.state.nextId(), event, actor: w.currentUser(repo), label, createdAt: nowIso() });
  };

  const addLabels = (repo: Repo, i: Issue, names: string[]) => {
    for (const name of names) {
      const l = labelOf(repo, name);
      if (i.labels.some((x) => x.toLowerCase() === l.name.toLowerCase())) continue;
      i.labels.push(l.name);
      i.updatedAt = nowIso();
      recordEvent(repo, i, "labeled", l.name);
      w.emit(repo, issueEvent(i), {
        action: "labeled",
        ...issuePayload(repo, i),
        label: w.shapes.label(repo, l),
      });
    }
  };

  const removeLabel = (repo: Repo, i: Issue, name: string): boolean => {
    const idx = i.labels.findIndex((x) => x.toLowerCase() === name.toLowerCase());
    if (idx < 0) return false;
    const [removed] = i.labels.splice(idx, 1);
    i.updatedAt = nowIso();
    recordEvent(repo, i, "unlabeled", removed!);
    const l = repo.labels.get(removed!.toLowerCase());
    w.emit(repo, issueEvent(i), {
      action: "unlabeled",
      ...issuePayload(repo, i),
      ...(l ? { label: w.shapes.label(repo, l) } : {}),
    });
    return true;
  };

  const setAssignees = (repo: Repo, i: Issue, add: string[], remove: string[]) => {
    for (const login of remove) {
      const idx = i.assignees.findIndex((a) => a.toLowerCase() === login.toLowerCase());
      if (idx < 0) continue;
      i.assignees.splice(idx, 1);
      w.emit(repo, issueEvent(i), {
        action: "unassigned",
        ...issuePayload(repo, i),
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
        ...issuePayload(repo, i),
        assignee: w.shapes.user(w.state.user(login)),
      });
    }
  };

  const setState = (repo: Repo, i: Issue, state: string, reason: string | null | undefined, by: User) => {
    if (state === i.state) return;
    const now = nowIso();
    i.state = state as Issue["state"];
    i.updatedAt = now;
    if (state === "closed") {
      i.closedAt = now;
      i.closedBy = by;
      i.stateReason = reason ?? "completed";
      w.emit(repo, issueEvent(i), { action: "closed", ...issuePayload(repo, i) });
    } else {
      i.closedAt = null;
      i.closedBy = null;
      i.stateReason = "reopened";
      w.emit(repo, issueEvent(i), { action: "reopened", ...issuePayload(repo, i) });
    }
  };

  const restIssue = (repo: Repo, i: Issue) => ({
    ...w.issueJson(repo, i),
    closed_by: i.closedBy ? w.shapes.user(i.closedBy) : null,
    sub_issues_summary: {
      total: i.subIssues.length,
      completed: i.subIssues.filter((id) => w.state.issuesById.get(id)?.issue.state === "closed").length,
      percent_completed: 0,
    },
  });

  r.on("POST /repos/{owner}/{repo}/issues", (ctx) => {
    const repo = w.repo(ctx);
    const by = w.actingUser(ctx);
    const b = ctx.body as Body;
    const now = nowIso();
    const i: Issue = {
      id: w.state.nextId(),
      number: repo.nextNumber++,
      title: String(b.title),
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
    };
    repo.issues.set(i.number, i);
    w.state.issuesById.set(i.id, { repo, issue: i });
    const triage = canTriage(ctx, repo);
    const assignees = [...((b.assignees as string[]) ?? []), ...(b.assignee ? [String(b.assignee)] : [])];
    // Without triage rights GitHub drops labels and assignees instead of failing.
    if (triage) {
      for (const n of labelNames(b.labels)) {
        const l = labelOf(repo, n);
        if (!i.labels.includes(l.name)) i.labels.push(l.name);
      }
      for (const a of assignees) {
        if (w.state.users.has(a.toLowerCase()) && w.state.permission(repo, a) !== "none")
          i.assignees.push(w.state.user(a).login);
      }
    }
    w.emit(repo, "issues", { action: "opened", issue: w.issueJson(repo, i) });
    for (const n of i.labels) {
      recordEvent(repo, i, "labeled", n);
      w.emit(repo, "issues", {
        action: "labeled",
        issue: w.issueJson(repo, i),
        label: w.shapes.label(repo, repo.labels.get(n.toLowerCase())!),
      });
    }
    return {
      status: 201,
      body: restIssue(repo, i),
      headers: { location: `${w.shapes.api}/repos/${repo.fullName}/issues/${i.number}` },
    };
  });

  r.on("GET /repos/{owner}/{repo}/issues", (ctx) => {
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
      list.map((i) => restIssue(repo, i)),
    );
  });

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/events", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const api = `${w.shapes.api}/repos/${repo.fullName}`;
    const events = (i.events ?? []).map((e) => {
      const l = repo.labels.get(e.label.toLowerCase());
      return {
        id: e.id,
        node_id: w.shapes.nodeId("LabeledEvent", e.id),
        url: `${api}/issues/events/${e.id}`,
        actor: w.shapes.user(e.actor),
        event: e.event,
        commit_id: null,
        commit_url: null,
        created_at: e.createdAt,
        label: { name: e.label, color: l?.color ?? "ededed" },
        performed_via_github_app: null,
      };
    });
    return paginate(ctx, w.shapes.api, events);
  });

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}", (ctx) => {
    const repo = w.repo(ctx);
    return { status: 200, body: restIssue(repo, w.issue(repo, ctx.params.issue_number)) };
  });

  r.on("PATCH /repos/{owner}/{repo}/issues/{issue_number}", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const by = w.actingUser(ctx);
    const b = ctx.body as Body;
    const triage = canTriage(ctx, repo);
    if (!triage && by.login !== i.user.login)
      throw new HttpError(403, "Must have triage access to edit this issue");
    const changes: Record<string, { from: unknown }> = {};
    if (typeof b.title === "string" && b.title !== i.title) {
      changes.title = { from: i.title };
      i.title = b.title;
    }
    if ("body" in b && b.body !== i.body) {
      changes.body = { from: i.body ?? "" };
      i.body = (b.body as string | null) ?? null;
    }
    if (Object.keys(changes).length > 0) {
      i.updatedAt = nowIso();
      w.emit(repo, issueEvent(i), { action: "edited", ...issuePayload(repo, i), changes });
    }
    if (triage && Array.isArray(b.labels)) {
      const next = labelNames(b.labels);
      for (const old of [...i.labels])
        if (!next.some((n) => n.toLowerCase() === old.toLowerCase())) removeLabel(repo, i, old);
      addLabels(repo, i, next);
    }
    if (triage && (Array.isArray(b.assignees) || "assignee" in b)) {
      const next = Array.isArray(b.assignees)
        ? (b.assignees as string[])
        : b.assignee
          ? [String(b.assignee)]
          : [];
      setAssignees(
        repo,
        i,
        next,
        i.assignees.filter((a) => !next.some((n) => n.toLowerCase() === a.toLowerCase())),
      );
    }
    if (typeof b.state === "string")
      setState(repo, i, b.state, b.state_reason as string | null | undefined, by);
    return { status: 200, body: restIssue(repo, i) };
  });

  // ---- comments ----
  const commentJson = (repo: Repo, c: Issue["comments"][number]) =>
    w.shapes.comment(repo, c, w.association(repo));

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const by = w.actingUser(ctx);
    if (i.locked && !canTriage(ctx, repo))
      throw new HttpError(403, "Unable to create comment because issue is locked.");
    const now = nowIso();
    const c = {
      id: w.state.nextId(),
      issueNumber: i.number,
      body: String((ctx.body as Body).body),
      user: by,
      createdAt: now,
      updatedAt: now,
    };
    i.comments.push(c);
    i.updatedAt = now;
    w.state.comments.set(c.id, { repo, comment: c });
    w.emit(repo, "issue_comment", {
      action: "created",
      issue: w.issueJson(repo, i),
      comment: commentJson(repo, c),
    });
    return {
      status: 201,
      body: commentJson(repo, c),
      headers: { location: `${w.shapes.api}/repos/${repo.fullName}/issues/comments/${c.id}` },
    };
  });

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const since = ctx.params.since ? String(ctx.params.since) : undefined;
    const list = i.comments.filter((c) => !since || c.updatedAt >= since);
    return paginate(
      ctx,
      w.shapes.api,
      list.map((c) => commentJson(repo, c)),
    );
  });

  r.on("GET /repos/{owner}/{repo}/issues/comments", (ctx) => {
    const repo = w.repo(ctx);
    const all = [...repo.issues.values()].flatMap((i) => i.comments).sort((a, b) => a.id - b.id);
    if (ctx.params.direction === "desc") all.reverse();
    return paginate(
      ctx,
      w.shapes.api,
      all.map((c) => commentJson(repo, c)),
    );
  });

  const findComment = (ctx: Ctx) => {
    const repo = w.repo(ctx);
    const found = w.state.comments.get(Number(ctx.params.comment_id));
    if (!found || found.repo !== repo) throw notFound();
    return { repo, c: found.comment, issue: repo.issues.get(found.comment.issueNumber)! };
  };

  r.on("GET /repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
    const { repo, c } = findComment(ctx);
    return { status: 200, body: commentJson(repo, c) };
  });

  r.on("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
    const { repo, c, issue } = findComment(ctx);
    const by = w.actingUser(ctx);
    if (by.login !== c.user.login && !canTriage(ctx, repo))
      throw new HttpError(403, "Must have write access to edit this comment");
    const from = c.body;
    c.body = String((ctx.body as Body).body);
    c.updatedAt = nowIso();
    w.emit(repo, "issue_comment", {
      action: "edited",
      issue: w.issueJson(repo, issue),
      comment: commentJson(repo, c),
      changes: { body: { from } },
    });
    return { status: 200, body: commentJson(repo, c) };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}", (ctx) => {
    const { repo, c, issue } = findComment(ctx);
    const by = w.actingUser(ctx);
    if (by.login !== c.user.login && !canTriage(ctx, repo))
      throw new HttpError(403, "Must have write access to delete this comment");
    issue.comments.splice(issue.comments.indexOf(c), 1);
    w.state.comments.delete(c.id);
    w.emit(repo, "issue_comment", {
      action: "deleted",
      issue: w.issueJson(repo, issue),
      comment: commentJson(repo, c),
    });
    return { status: 204 };
  });

  // ---- labels ----
  r.on("GET /repos/{owner}/{repo}/labels", (ctx) => {
    const repo = w.repo(ctx);
    return paginate(
      ctx,
      w.shapes.api,
      [...repo.labels.values()].map((l) => w.shapes.label(repo, l)),
    );
  });

  r.on("POST /repos/{owner}/{repo}/labels", (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const name = String(b.name);
    if (repo.labels.has(name.toLowerCase())) {
      throw validationFailed([{ resource: "Label", code: "already_exists", field: "name" }]);
    }
    const l: Label = {
      id: w.state.nextId(),
      name,
      color: String(b.color ?? "ededed").replace(/^#/, ""),
      description: (b.description as string | undefined) ?? null,
      default: false,
    };
    repo.labels.set(name.toLowerCase(), l);
    return { status: 201, body: w.shapes.label(repo, l) };
  });

  r.on("GET /repos/{owner}/{repo}/labels/{name}", (ctx) => {
    const repo = w.repo(ctx);
    const l = repo.labels.get(String(ctx.params.name).toLowerCase());
    if (!l) throw notFound();
    return { status: 200, body: w.shapes.label(repo, l) };
  });

  r.on("PATCH /repos/{owner}/{repo}/labels/{name}", (ctx) => {
    const repo = w.repo(ctx, "write");
    const l = repo.labels.get(String(ctx.params.name).toLowerCase());
    if (!l) throw notFound();
    const b = ctx.body as Body;
    if (typeof b.new_name === "string" && b.new_name !== l.name) {
      repo.labels.delete(l.name.toLowerCase());
      for (const i of repo.issues.values())
        i.labels = i.labels.map((n) => (n === l.name ? String(b.new_name) : n));
      l.name = b.new_name;
      repo.labels.set(l.name.toLowerCase(), l);
    }
    if (typeof b.color === "string") l.color = b.color.replace(/^#/, "");
    if ("description" in b) l.description = (b.description as string | null) ?? null;
    return { status: 200, body: w.shapes.label(repo, l) };
  });

  r.on("DELETE /repos/{owner}/{repo}/labels/{name}", (ctx) => {
    const repo = w.repo(ctx, "write");
    const l = repo.labels.get(String(ctx.params.name).toLowerCase());
    if (!l) throw notFound();
    repo.labels.delete(l.name.toLowerCase());
    for (const i of repo.issues.values()) i.labels = i.labels.filter((n) => n !== l.name);
    return { status: 204 };
  });

  const issueLabels = (repo: Repo, i: Issue) =>
    i.labels
      .map((n) => repo.labels.get(n.toLowerCase()))
      .filter((l): l is Label => !!l)
      .map((l) => w.shapes.label(repo, l));

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const repo = w.repo(ctx);
    return paginate(ctx, w.shapes.api, issueLabels(repo, w.issue(repo, ctx.params.issue_number)));
  });

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    addLabels(repo, i, labelNames((ctx.body as Body).labels));
    return { status: 200, body: issueLabels(repo, i) };
  });

  r.on("PUT /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    const next = labelNames((ctx.body as Body | undefined)?.labels);
    for (const old of [...i.labels])
      if (!next.some((n) => n.toLowerCase() === old.toLowerCase())) removeLabel(repo, i, old);
    addLabels(repo, i, next);
    return { status: 200, body: issueLabels(repo, i) };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    for (const old of [...i.labels]) removeLabel(repo, i, old);
    return { status: 204 };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    if (!removeLabel(repo, i, String(ctx.params.name))) throw new HttpError(404, "Label does not exist");
    return { status: 200, body: issueLabels(repo, i) };
  });

  // ---- assignees ----
  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/assignees", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    setAssignees(repo, i, ((ctx.body as Body | undefined)?.assignees as string[]) ?? [], []);
    return { status: 201, body: restIssue(repo, i) };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/assignees", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    setAssignees(repo, i, [], ((ctx.body as Body | undefined)?.assignees as string[]) ?? []);
    return { status: 200, body: restIssue(repo, i) };
  });

  // ---- sub-issues ----
  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const subs = i.subIssues.map((id) => w.state.issuesById.get(id)!).filter(Boolean);
    return paginate(
      ctx,
      w.shapes.api,
      subs.map((s) => restIssue(s.repo, s.issue)),
    );
  });

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const parent = w.issue(repo, ctx.params.issue_number);
    const b = ctx.body as Body;
    const sub = w.state.issuesById.get(Number(b.sub_issue_id));
    if (!sub || sub.repo.owner !== repo.owner) throw notFound();
    if (sub.issue === parent)
      throw validationFailed([
        { resource: "Issue", code: "custom", message: "An issue cannot be its own sub-issue" },
      ]);
    if (parent.subIssues.includes(sub.issue.id)) {
      throw validationFailed([{ resource: "Issue", code: "custom", message: "Sub-issue already exists" }]);
    }
    if (sub.issue.parent !== undefined) {
      if (b.replace_parent !== true) {
        throw validationFailed([
          {
            resource: "Issue",
            code: "custom",
            message: "Issue may not contain duplicate sub-issues, or already have a parent",
          },
        ]);
      }
      const old = w.state.issuesById.get(sub.issue.parent)?.issue;
      if (old) old.subIssues = old.subIssues.filter((id) => id !== sub.issue.id);
    }
    parent.subIssues.push(sub.issue.id);
    sub.issue.parent = parent.id;
    return { status: 201, body: restIssue(repo, parent) };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/sub_issue", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const parent = w.issue(repo, ctx.params.issue_number);
    const id = Number((ctx.body as Body).sub_issue_id);
    if (!parent.subIssues.includes(id)) throw notFound();
    parent.subIssues = parent.subIssues.filter((x) => x !== id);
    const sub = w.state.issuesById.get(id);
    if (sub) sub.issue.parent = undefined;
    return { status: 200, body: restIssue(repo, sub?.issue ?? parent) };
  });

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/parent", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const p = i.parent !== undefined ? w.state.issuesById.get(i.parent) : undefined;
    if (!p) throw notFound();
    return { status: 200, body: restIssue(p.repo, p.issue) };
  });
}

/** Labels arrive as names or `{name}` objects. */
function labelNames(v: unknown): string[] {
  if (!Array.isArray(v)) return [];
  return v
    .map((x) => (typeof x === "string" ? x : String((x as { name?: unknown }).name ?? "")))
    .filter(Boolean);
}
