import type { Context } from "probot";
import type { FleetConfig } from "../core/config.ts";
import { getRepoRole } from "../github/permissions.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { noticeMarker } from "../render/markers.ts";
import { renderConfigProblems, renderNotAllowed } from "../render/notices.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { CONFIG_PATH, loadRepoConfig } from "./load-config.ts";

type IssueContext = Context<"issues" | "issue_comment">;

/** The repository's config, or null after telling the issue what is wrong with it. */
export async function configOrExplain(context: IssueContext, deps: HandlerDeps): Promise<FleetConfig | null> {
  const loaded = await loadRepoConfig(deps.github, context.repo(), deps.configs);
  if (loaded.ok) return loaded.config;
  await upsertMarkedComment(
    deps.github,
    context.issue(),
    noticeMarker("config-invalid"),
    renderConfigProblems(CONFIG_PATH, loaded.problems),
  );
  return null;
}

/**
 * A labeled issue's way in: the repository's config is valid and the labeler may drive Fleet (else the
 * issue says why, and undefined). Gives the labeler, the issue's labels and the repository's queue.
 */
export async function admitLabeler(context: Context<"issues.labeled">, deps: HandlerDeps) {
  const config = await configOrExplain(context, deps);
  if (!config) return undefined;
  const sender = context.payload.sender.login;
  if (!(await allowedOrExplain(context, deps, config, sender))) return undefined;
  const labels = (context.payload.issue.labels ?? []).map((l) =>
    typeof l === "string" ? l : (l.name ?? ""),
  );
  const queue = await deps.queues.forContext(context, config);
  return { config, sender, labels, queue };
}

/** Whether `login` may drive Fleet in `repo`: a role in `allowed_roles` (from the file only). */
export async function mayDriveFleet(
  github: GitHub,
  repo: RepoRef,
  config: FleetConfig,
  login: string,
): Promise<boolean> {
  const role = await getRepoRole(github, repo, login);
  return (config.allowed_roles as readonly string[]).includes(role);
}

/**
 * True when `login` may drive Fleet here; otherwise the issue says who may (at most once per person
 * per issue per hour: a reader's stream of commands gets one answer), and false.
 */
export async function allowedOrExplain(
  context: IssueContext,
  deps: HandlerDeps,
  config: FleetConfig,
  login: string,
): Promise<boolean> {
  if (await mayDriveFleet(deps.github, context.repo(), config, login)) return true;
  await replyToOutsider(context, deps, config, login, renderNotAllowed(login, config.allowed_roles));
  return false;
}

/**
 * A comment for someone who may not drive Fleet, on the event's issue, unless they had one there in
 * the last hour (kept in the repository state, so replicas and restarts agree).
 */
export async function replyToOutsider(
  context: IssueContext,
  deps: HandlerDeps,
  config: FleetConfig,
  login: string,
  body: string,
): Promise<boolean> {
  const queue = await deps.queues.forContext(context, config);
  const { issue_number } = context.issue();
  if (!(await queue.claimReply(issue_number, login))) return false;
  await deps.github.issues.createComment(context.repo(), issue_number, body);
  return true;
}
