import type { Context } from "probot";
import { parseDependencies } from "../core/dependencies.ts";
import { mayDriveFleet } from "./guard.ts";
import type { HandlerDeps } from "./handler-deps.ts";
import { loadRepoConfig } from "./load-config.ts";

/**
 * `issues.edited` (title or body) of an issue with a Fleet task: the prompt was pinned when the task
 * was queued. An edit by someone who may drive Fleet re-pins it (new digest, new bead text); anyone
 * else's edit leaves the pin, and the tracking comment says the agent gets the text as it was queued.
 * Bots (another app's, or Fleet's own) never re-pin.
 */
export async function onIssueEdited(context: Context<"issues.edited">, deps: HandlerDeps): Promise<void> {
  const { payload } = context;
  const changes = payload.changes as { title?: unknown; body?: unknown } | undefined;
  if (!changes || (changes.title === undefined && changes.body === undefined)) return;
  const loaded = await loadRepoConfig(deps.github, context.repo(), deps.configs);
  if (!loaded.ok) return;
  const queue = await deps.queues.forContext(context, loaded.config);
  const issue = payload.issue;
  const doc = await queue.snapshot();
  // Most edited issues have no task: no permission lookup and no commit for them.
  if (!Object.values(doc.tasks).some((t) => t.issue === issue.number && t.state !== "done")) return;
  const by = payload.sender.login;
  // An app's bot is a "Bot" whose login ends in [bot] (a character no person's login has).
  const bot = payload.sender.type === "Bot" || by.endsWith("[bot]");
  const allowed = !bot && (await mayDriveFleet(deps.github, context.repo(), loaded.config, by));
  // An edited body says anew what the issue waits for (its `Depends on` lines), as when it was labeled.
  const dependsOn =
    changes.body === undefined
      ? {}
      : { dependsOn: parseDependencies(issue.body ?? "", payload.repository.full_name) };
  await queue.issueEdited(issue.number, {
    title: issue.title,
    body: issue.body ?? null,
    by,
    allowed,
    ...dependsOn,
  });
}
