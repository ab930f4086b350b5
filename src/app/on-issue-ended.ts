import type { Context } from "probot";
import { parseFleetLabel } from "../core/labels.ts";
import { CANCELLABLE_STATES } from "../core/lifecycle.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";

/** `issues.unlabeled` (a coder label) and `issues.closed`: the task is cancelled and its agent stopped. */
export async function onIssueEnded(
  context: Context<"issues.unlabeled"> | Context<"issues.closed">,
  deps: HandlerDeps,
): Promise<void> {
  const { payload } = context;
  let coder: string | undefined;
  let reason: string;
  if (payload.action === "unlabeled") {
    const parsed = parseFleetLabel(payload.label?.name ?? "", deps.knownCoders);
    if (parsed.kind !== "coder") return;
    coder = parsed.coder;
    reason = `label ${payload.label?.name} removed by @${payload.sender.login}`;
  } else {
    reason = `issue closed by @${payload.sender.login}`;
  }
  const loaded = await loadRepoConfig(deps.github, (context as Context<"issues">).repo(), deps.configs);
  if (!loaded.ok) return;
  const queue = await deps.queues.forContext(context, loaded.config);
  const doc = await queue.snapshot();
  const live = Object.values(doc.tasks).filter(
    (t) =>
      t.issue === payload.issue.number &&
      CANCELLABLE_STATES.includes(t.state) &&
      (!coder || t.coder === coder),
  );
  for (const t of live) {
    await queue.move(t.issue, "cancelled", { reason, taskId: t.id, from: [...CANCELLABLE_STATES] });
  }
}
