import { HttpError, notFound, validationFailed } from "../http-error.ts";
import { addLabels, issueLabels, labelNames, removeLabel, replaceLabels } from "../issue-changes.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import type { Label } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Labels: the repository's, and those on an issue (https://docs.github.com/en/rest/issues/labels). */
export function registerLabelRoutes(r: Router, w: World): void {
  r.on("GET /repos/{owner}/{repo}/labels", (ctx) => {
    const repo = w.repo(ctx);
    return paginate(
      ctx,
      w.shapes.api,
      [...repo.labels.values()].map((l) => w.shapes.label(repo, l)),
    );
  });
  r.on("POST /repos/{owner}/{repo}/labels", (ctx) => createLabel(w, ctx));
  r.on("GET /repos/{owner}/{repo}/labels/{name}", (ctx) => {
    const { repo, l } = findLabel(w, ctx, "read");
    return { status: 200, body: w.shapes.label(repo, l) };
  });
  r.on("PATCH /repos/{owner}/{repo}/labels/{name}", (ctx) => updateLabel(w, ctx));
  r.on("DELETE /repos/{owner}/{repo}/labels/{name}", (ctx) => {
    const { repo, l } = findLabel(w, ctx, "write");
    repo.labels.delete(l.name.toLowerCase());
    for (const i of repo.issues.values()) i.labels = i.labels.filter((n) => n !== l.name);
    return { status: 204 };
  });
  registerIssueLabelRoutes(r, w);
}

function registerIssueLabelRoutes(r: Router, w: World): void {
  const target = (ctx: Ctx) => {
    const repo = w.repo(ctx, "triage");
    return { repo, i: w.issue(repo, ctx.params.issue_number) };
  };

  r.on("GET /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const repo = w.repo(ctx);
    return paginate(ctx, w.shapes.api, issueLabels(w, repo, w.issue(repo, ctx.params.issue_number)));
  });

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const { repo, i } = target(ctx);
    addLabels(w, repo, i, labelNames((ctx.body as Body).labels));
    return { status: 200, body: issueLabels(w, repo, i) };
  });

  r.on("PUT /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const { repo, i } = target(ctx);
    replaceLabels(w, repo, i, labelNames((ctx.body as Body | undefined)?.labels));
    return { status: 200, body: issueLabels(w, repo, i) };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels", (ctx) => {
    const { repo, i } = target(ctx);
    for (const old of [...i.labels]) removeLabel(w, repo, i, old);
    return { status: 204 };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", (ctx) => {
    const { repo, i } = target(ctx);
    if (!removeLabel(w, repo, i, String(ctx.params.name))) throw new HttpError(404, "Label does not exist");
    return { status: 200, body: issueLabels(w, repo, i) };
  });
}

function findLabel(w: World, ctx: Ctx, need: "read" | "write") {
  const repo = w.repo(ctx, need);
  const l = repo.labels.get(String(ctx.params.name).toLowerCase());
  if (!l) throw notFound();
  return { repo, l };
}

function createLabel(w: World, ctx: Ctx): Reply {
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
}

function updateLabel(w: World, ctx: Ctx): Reply {
  const { repo, l } = findLabel(w, ctx, "write");
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
}
