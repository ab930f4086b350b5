import type { Context } from "probot";
import type { FleetConfig } from "../core/config.ts";
import { getRepoRole } from "../github/permissions.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { noticeMarker } from "../render/markers.ts";
import { renderConfigProblems, renderNotAllowed } from "../render/notices.ts";
import type { ConfigCache } from "./config-cache.ts";
import { CONFIG_PATH, loadRepoConfig } from "./load-config.ts";

type IssueContext = Context<"issues" | "issue_comment">;

/** The repository's config, or null after telling the issue what is wrong with it. */
export async function configOrExplain(
  context: IssueContext,
  cache?: ConfigCache,
): Promise<FleetConfig | null> {
  const loaded = await loadRepoConfig(context, cache);
  if (loaded.ok) return loaded.config;
  await upsertMarkedComment(
    context.octokit,
    context.issue(),
    noticeMarker("config-invalid"),
    renderConfigProblems(CONFIG_PATH, loaded.problems),
  );
  return null;
}

/** True when `login` may drive Fleet here; otherwise the issue says who may, and false. */
export async function allowedOrExplain(
  context: IssueContext,
  config: FleetConfig,
  login: string,
): Promise<boolean> {
  const role = await getRepoRole(context.octokit, context.repo(), login);
  if ((config.allowed_roles as readonly string[]).includes(role)) return true;
  await upsertMarkedComment(
    context.octokit,
    context.issue(),
    noticeMarker(`not-allowed-${login.toLowerCase()}`),
    renderNotAllowed(login, config.allowed_roles),
  );
  return false;
}
