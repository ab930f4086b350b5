import type { FleetStateDoc } from "../../core/state-doc.ts";
import { summarizeResult, type Task, type TaskResultSummary } from "../../core/task.ts";
import type { GitHub, RepoRef } from "../../github/port.ts";
import { upsertMarkedComment } from "../../github/upsert-comment.ts";
import {
  type AbSide,
  abComparisonMarker,
  abFinished,
  abRoundKey,
  abSides,
  renderAbComparison,
} from "../../render/ab-comparison.ts";
import type { StateStore } from "../../state/store.ts";
import { ResultSchema } from "../workspace/artifacts.ts";

/** What the worker records when attempt `attempt` ends: RESULT.json as figures, when it is valid. */
export function resultSummaryOf(attempt: number, raw: unknown): TaskResultSummary {
  const parsed = ResultSchema.safeParse(raw);
  return summarizeResult(attempt, parsed.success ? parsed.data : undefined);
}

const ROUNDS_KEY = "abComparisons";

/** `doc.abComparisons[issue]`: the A/B round whose comparison was posted last. */
function postedRounds(doc: FleetStateDoc): Record<string, string> {
  const raw = doc[ROUNDS_KEY];
  return typeof raw === "object" && raw !== null && !Array.isArray(raw)
    ? (raw as Record<string, string>)
    : {};
}

/**
 * The state change that makes one worker the poster of an A/B comparison: when every side of the
 * issue's A/B run has finished and this round was not posted yet, it is recorded as posted. null
 * otherwise (not finished, or someone posted it).
 */
export function claimAbComparisonRound(
  doc: FleetStateDoc,
  issue: number,
): { doc: FleetStateDoc; message: string; sides: Task[] } | null {
  const sides = abSides(Object.values(doc.tasks), issue);
  if (!abFinished(sides)) return null;
  const round = abRoundKey(sides);
  const rounds = postedRounds(doc);
  if (rounds[String(issue)] === round) return null;
  return {
    doc: { ...doc, [ROUNDS_KEY]: { ...rounds, [String(issue)]: round } },
    message: `A/B comparison of gh-${issue}: ${round}`,
    sides,
  };
}

/**
 * After a task's outcome is recorded: when it was the last side of an A/B run to finish, posts the
 * issue's one comparison comment. The round is claimed in the state first (compare-and-swap), so
 * two workers finishing together, or a repeated call, post it once; a later round edits it in place.
 * Returns whether this call posted.
 */
export async function postAbComparisonIfDue(
  deps: { store: StateStore; github: GitHub; repo: RepoRef; log?: (m: string) => void },
  issue: number,
): Promise<boolean> {
  let sides: Task[] = [];
  const update = await deps.store.update(({ doc }) => {
    const claimed = claimAbComparisonRound(doc, issue);
    sides = claimed?.sides ?? [];
    return claimed;
  });
  if (!update.applied) return false;
  const view: AbSide[] = [];
  for (const t of sides) {
    const side: AbSide = { taskId: t.id, coder: t.coder, model: t.model, state: t.state };
    if (t.totals) side.totals = t.totals;
    if (t.result) side.result = t.result;
    if (t.pr !== undefined) {
      side.pr = { number: t.pr };
      try {
        const data = await deps.github.pulls.get(deps.repo, t.pr);
        side.diff = { files: data.changed_files, additions: data.additions, deletions: data.deletions };
      } catch (error) {
        deps.log?.(`A/B comparison: could not read PR #${t.pr}: ${(error as Error).message}`);
      }
    }
    view.push(side);
  }
  await upsertMarkedComment(
    deps.github,
    { ...deps.repo, issue_number: issue },
    abComparisonMarker(issue),
    renderAbComparison(issue, view),
  );
  return true;
}
