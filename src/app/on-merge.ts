import type { Context } from "probot";
import { loadRepoConfig } from "./load-config.ts";
import type { HandlerDeps } from "./on-issue-labeled.ts";
import { rebaseOthersAfterMerge } from "./on-rebase.ts";
import { closeEpicWhenDone } from "./on-split-label.ts";

/** A merged `fleet/*` pull request with its repository's queue and state, as read once for what follows. */
export type MergedFleetPr = NonNullable<Awaited<ReturnType<typeof mergedFleetPr>>>;

async function mergedFleetPr(context: Context<"pull_request.closed">, deps: HandlerDeps) {
  const pr = context.payload.pull_request;
  if (!pr.merged || !pr.head.ref.startsWith("fleet/")) return undefined;
  const loaded = await loadRepoConfig(context as unknown as Context<"issues">, deps.configs);
  if (!loaded.ok) return undefined;
  const queue = await deps.queues.forContext(context, loaded.config);
  return { pr, queue, doc: await queue.snapshot() };
}

/**
 * `pull_request.closed` (merged) on a `fleet/*` branch: the merge moved the base, so other Fleet PRs
 * that now conflict get a rebase run; and a finished split's epic is closed. Each goes on when the
 * other fails; the first failure is reported.
 */
export async function onFleetPrMerged(
  context: Context<"pull_request.closed">,
  deps: HandlerDeps,
): Promise<void> {
  const merged = await mergedFleetPr(context, deps);
  if (!merged) return;
  const results = await Promise.allSettled([
    closeEpicWhenDone(context, merged),
    rebaseOthersAfterMerge(context, merged),
  ]);
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
}
