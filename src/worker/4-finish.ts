import { open, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { transcriptOfLog } from "../agents/transcript.ts";
import { stateAfterOutcome } from "../core/outcomes.ts";
import { neutraliseMentions } from "../core/published-text.ts";
import { unenforcedLimitsNote } from "../core/resource-limits.ts";
import type { OutcomeKind, PhaseRun, RunContext, TaskOutcome } from "./run-context.ts";
import { type AgentArtifacts, NETWORK_FILE } from "./workspace/artifacts.ts";

/** Records the outcome, posts the reports (never throwing) and tells the caller the final state. */
export async function finish(
  ctx: RunContext,
  outcome: OutcomeKind,
  reason: string | undefined,
  run?: PhaseRun,
  notes?: AgentArtifacts,
): Promise<TaskOutcome> {
  const { result, reporter, redact } = ctx;
  result.outcome = outcome;
  const logNote = run?.logError
    ? `The agent's log could not be written (${run.logError}), so it is incomplete; free space on the worker's disk.`
    : undefined;
  const fullReason = logNote ? (reason ? `${reason} ${logNote}` : logNote) : reason;
  // A run's reason may quote the agent (its summary, its last message): inert once, here where it is recorded.
  if (fullReason !== undefined) result.reason = redact(neutraliseMentions(fullReason, { untrusted: true }));
  if (run?.rateLimit) result.rateLimit = run.rateLimit;
  if (run?.sessionId && !result.sessionId) result.sessionId = run.sessionId;
  // `fleet task <id> log` lists what the egress proxy refused, from the task's artifacts.
  if (result.network?.refused.length)
    await writeFile(
      join(ctx.artifactsDir, NETWORK_FILE),
      `${JSON.stringify(result.network, null, 2)}\n`,
    ).catch(() => undefined);
  if (outcome !== "awaiting-approval") {
    try {
      // Redacted before it is rendered: the rendering cuts long lines, and a cut secret is no longer known.
      const log = run
        ? transcriptOfLog(ctx.deps.adapter, redact(await readLogTail(run.logFile)), { quiet: true })
        : "";
      await reporter.final({
        tokens:
          result.totals || result.planTotals
            ? {
                outcome: outcomeLine(result, ctx.spec.runKind === "review"),
                totals: result.totals,
                planTotals: result.planTotals,
                earlierRuns: ctx.spec.earlierRuns,
                runKind: result.kind ?? ctx.spec.runKind,
                ...(result.agentTotals ? { agentTotals: result.agentTotals } : {}),
              }
            : undefined,
        run: {
          // The run report has no budget headline of its own; the reason says "stopped: ... budget".
          outcome: outcome === "over-budget" ? "failed" : outcome,
          reason: result.reason,
          pr: result.pr,
          summary: notes?.result?.summary,
          resultProblem:
            outcome === "pr-opened" || outcome === "no-changes" ? notes?.resultProblem : undefined,
          ...followUpsOf(ctx, outcome, notes),
          onPullRequest: ctx.spec.runKind === "review",
          ...(result.kind === "pr-review" ? { prReview: true } : {}),
          log,
          resetsAt: result.rateLimit?.resetsAt,
          ...(result.network ? { network: result.network } : {}),
          ...(result.limits ? optionalNote(unenforcedLimitsNote(result.limits)) : {}),
        },
      });
    } catch (error) {
      // The outcome stands even when GitHub refuses the report; the caller still learns it.
      result.reason = redact(
        `${result.reason ? `${result.reason} ` : ""}(Posting the report failed: ${(error as Error).message})`,
      );
    }
  }
  await ctx.progress(
    {
      state: stateAfterOutcome(outcome, {
        retriesLeft: false,
        cancelledByUser: true,
        onOpenPr: ctx.spec.runKind === "review",
        prReview: ctx.spec.runKind === "pr-review",
      }),
      step: outcome,
      usage: result.totals?.usage,
      costUsd: result.totals?.costUsd,
    },
    true,
  );
  return result;
}

const optionalNote = (note: string | undefined) => (note ? { limitsNotEnforced: note } : {});

/** The follow-ups the run files as issues (see fileDiscoveredWork), for the report to say how many it leaves out. */
function followUpsOf(ctx: RunContext, outcome: OutcomeKind, notes: AgentArtifacts | undefined) {
  const max = ctx.spec.maxFollowUps;
  const listed = notes?.result?.followUps ?? [];
  const files = (outcome === "pr-opened" || outcome === "no-changes") && !ctx.spec.split;
  return files && max !== undefined && listed.length > 0 ? { followUps: { listed, max } } : {};
}

/** More than a run report can show; whole lines only, so a secret is never cut in two. */
const LOG_TAIL_BYTES = 256 * 1024;

/** The end of the agent's log, without reading a large log whole. */
async function readLogTail(path: string): Promise<string> {
  try {
    const file = await open(path, "r");
    try {
      const { size } = await file.stat();
      const start = Math.max(0, size - LOG_TAIL_BYTES);
      const buf = Buffer.alloc(size - start);
      await file.read(buf, 0, buf.length, start);
      const text = buf.toString("utf8");
      return start === 0 ? text : text.slice(text.indexOf("\n") + 1);
    } finally {
      await file.close();
    }
  } catch {
    return "";
  }
}

function outcomeLine(r: TaskOutcome, reviewRound: boolean): string {
  switch (r.outcome) {
    case "pr-opened":
      return `pull request #${r.pr?.number} opened or updated`;
    case "no-changes":
      if (r.kind === "pr-review") return "review posted on the pull request";
      return reviewRound
        ? "the round changed nothing; the pull request is as it was"
        : "finished without changes; no pull request";
    case "split":
      return "split: the plan's sub-issues are queued";
    case "waiting":
      return "the agent asked a question and waits for an answer";
    default:
      return r.outcome;
  }
}
