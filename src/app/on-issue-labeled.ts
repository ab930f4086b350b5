import type { Context } from "probot";
import { LABEL_GRAMMAR_HELP, parseFleetLabel } from "../core/labels.ts";
import { getRepoRole } from "../github/permissions.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { labelErrorMarker, noticeMarker, trackingMarker } from "../render/markers.ts";
import { renderConfigProblems, renderLabelError, renderNotAllowed } from "../render/notices.ts";
import { renderTrackingComment } from "../render/tracking-comment.ts";
import { CONFIG_PATH, loadRepoConfig } from "./load-config.ts";

export interface LabelHandlerDeps {
  knownCoders: readonly string[];
}

/** `issues.labeled`: a `fleet:<coder>[:<model>]` label turns the issue into a queued task. */
export async function onIssueLabeled(
  context: Context<"issues.labeled">,
  deps: LabelHandlerDeps,
): Promise<void> {
  const { payload } = context;
  const labelName = payload.label?.name;
  if (!labelName) return;

  const parsed = parseFleetLabel(labelName, deps.knownCoders);
  if (parsed.kind === "none" || parsed.kind === "priority") return;
  const issueRef = context.issue();

  if (parsed.kind === "error") {
    const body = renderLabelError(labelName, parsed.message, LABEL_GRAMMAR_HELP);
    await upsertMarkedComment(context.octokit, issueRef, labelErrorMarker(labelName), body);
    return;
  }
  if (parsed.kind !== "coder") return;

  const loaded = await loadRepoConfig(context);
  if (!loaded.ok) {
    await upsertMarkedComment(
      context.octokit,
      issueRef,
      noticeMarker("config-invalid"),
      renderConfigProblems(CONFIG_PATH, loaded.problems),
    );
    return;
  }
  const config = loaded.config;

  const sender = payload.sender.login;
  const role = await getRepoRole(context.octokit, context.repo(), sender);
  if (!(config.allowed_roles as readonly string[]).includes(role)) {
    await upsertMarkedComment(
      context.octokit,
      issueRef,
      noticeMarker(`not-allowed-${sender.toLowerCase()}`),
      renderNotAllowed(sender, config.allowed_roles),
    );
    return;
  }

  const taskKey = labelName.slice("fleet:".length).toLowerCase();
  const model = parsed.model ?? config.coders[parsed.coder]?.model ?? "default";
  const body = renderTrackingComment({ taskKey, state: "queued", coder: parsed.coder, model, priority: 2 });
  await upsertMarkedComment(context.octokit, issueRef, trackingMarker(taskKey), body);
}
