import type { Router } from "../router.ts";
import { nowIso } from "../state.ts";
import type { World } from "../world.ts";
import { findComment } from "./issue-comments.ts";

/** Reactions on issue comments and issues (a bot acknowledging a command with 👀). */
export function registerReactionRoutes(r: Router, w: World): void {
  const stored = new Map<string, Array<{ id: number; login: string; content: string; createdAt: string }>>();

  const react = (key: string, login: string, content: string) => {
    const list = stored.get(key) ?? [];
    const existing = list.find((x) => x.login === login && x.content === content);
    if (existing) return { status: 200, rec: existing };
    const rec = { id: w.state.nextId(), login, content, createdAt: nowIso() };
    list.push(rec);
    stored.set(key, list);
    return { status: 201, rec };
  };
  const json = (rec: { id: number; login: string; content: string; createdAt: string }) => ({
    id: rec.id,
    node_id: w.shapes.nodeId("Reaction", rec.id),
    user: w.shapes.user(w.state.user(rec.login)),
    content: rec.content,
    created_at: rec.createdAt,
  });

  r.on("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", (ctx) => {
    const { c } = findComment(w, ctx);
    // GitHub answers 200 for a reaction that already exists, 201 for a new one.
    const { status, rec } = react(
      `c:${c.id}`,
      w.actingUser(ctx).login,
      String((ctx.body as { content: string }).content),
    );
    return { status, body: json(rec) };
  });

  r.on("GET /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", (ctx) => {
    const { c } = findComment(w, ctx);
    const list = (stored.get(`c:${c.id}`) ?? []).filter(
      (x) => !ctx.params.content || x.content === ctx.params.content,
    );
    return { status: 200, body: list.map(json) };
  });

  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/reactions", (ctx) => {
    const repo = w.repo(ctx);
    const i = w.issue(repo, ctx.params.issue_number);
    const { status, rec } = react(
      `i:${i.id}`,
      w.actingUser(ctx).login,
      String((ctx.body as { content: string }).content),
    );
    return { status, body: json(rec) };
  });
}
