import type { Router } from "../router.ts";
import { paginate, type World } from "../world.ts";

/**
 * An issue's events (https://docs.github.com/en/rest/issues/events): `labeled` and `unlabeled`, with
 * the actor who made each change.
 */
export function registerIssueEventRoutes(r: Router, w: World): void {
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
}
