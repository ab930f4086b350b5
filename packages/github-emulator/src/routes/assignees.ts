import { restIssue, setAssignees } from "../issue-changes.ts";
import type { Body, Router } from "../router.ts";
import type { World } from "../world.ts";

/** Assignees of an issue (https://docs.github.com/en/rest/issues/assignees). */
export function registerAssigneeRoutes(r: Router, w: World): void {
  r.on("POST /repos/{owner}/{repo}/issues/{issue_number}/assignees", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    setAssignees(w, repo, i, ((ctx.body as Body | undefined)?.assignees as string[]) ?? [], []);
    return { status: 201, body: restIssue(w, repo, i) };
  });

  r.on("DELETE /repos/{owner}/{repo}/issues/{issue_number}/assignees", (ctx) => {
    const repo = w.repo(ctx, "triage");
    const i = w.issue(repo, ctx.params.issue_number);
    setAssignees(w, repo, i, [], ((ctx.body as Body | undefined)?.assignees as string[]) ?? []);
    return { status: 200, body: restIssue(w, repo, i) };
  });
}
