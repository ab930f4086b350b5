import { describe, expect, it } from "vitest";
import { canTransition, SLOT_HOLDING_STATES } from "../../src/core/lifecycle.ts";
import {
  hasRetriesLeft,
  isRetry,
  outcomeNote,
  RUN_OUTCOMES,
  type RunOutcome,
  stateAfterOutcome,
} from "../../src/core/outcomes.ts";

const withRetries = { retriesLeft: true, cancelledByUser: false };
const noRetriesLeft = { retriesLeft: false, cancelledByUser: false };

describe("stateAfterOutcome", () => {
  it.each<[RunOutcome, string]>([
    ["pr-opened", "pr-open"],
    ["no-changes", "failed"],
    ["split", "done"],
    ["awaiting-approval", "awaiting-approval"],
    ["rate-limited", "rate-limited"],
    ["over-budget", "failed"],
  ])("%s -> %s, retries left or not", (outcome, state) => {
    expect(stateAfterOutcome(outcome, withRetries)).toBe(state);
    expect(stateAfterOutcome(outcome, noRetriesLeft)).toBe(state);
  });

  it("never ends a run as done but a split: done is a merge's (or a person's) to give", () => {
    for (const outcome of RUN_OUTCOMES)
      for (const context of [withRetries, noRetriesLeft, { ...withRetries, onOpenPr: true }])
        if (outcome !== "split") expect(stateAfterOutcome(outcome, context)).not.toBe("done");
  });

  it("a round on an open PR (review, rebase) ends back on the PR unless it is tried again", () => {
    const onPr = { ...noRetriesLeft, onOpenPr: true };
    for (const outcome of ["no-changes", "over-budget", "failed", "timeout", "stall", "pr-opened"] as const)
      expect(stateAfterOutcome(outcome, onPr), outcome).toBe("pr-open");
    expect(stateAfterOutcome("failed", { ...withRetries, onOpenPr: true })).toBe("queued");
    expect(stateAfterOutcome("rate-limited", onPr)).toBe("rate-limited");
    expect(stateAfterOutcome("cancelled", { ...onPr, cancelledByUser: true })).toBe("cancelled");
  });

  it("says why a task with no change failed, and how a round ended on its PR", () => {
    expect(
      outcomeNote("no-changes", "failed", "The agent changed no files. Its summary: nothing to do"),
    ).toBe(
      "No changes, so no pull request. The agent changed no files. Its summary: nothing to do. Comment `/fleet retry` to run it again.",
    );
    expect(outcomeNote("no-changes", "failed", "Nothing to do.", "Run `fleet retry fl-3`")).toBe(
      "No changes, so no pull request. Nothing to do. Run `fleet retry fl-3` to run it again.",
    );
    expect(outcomeNote("no-changes", "pr-open", undefined)).toBe(
      "The round ended without changes; the pull request is as it was.",
    );
    expect(outcomeNote("timeout", "pr-open", "ran too long")).toBe(
      "The round ended (timeout); the pull request is as it was. ran too long.",
    );
    expect(outcomeNote("failed", "failed", "boom")).toBe("boom");
    expect(outcomeNote("pr-opened", "pr-open", undefined)).toBeUndefined();
  });

  it.each<RunOutcome>(["failed", "timeout", "stall"])("%s is retried while retries are left", (outcome) => {
    expect(stateAfterOutcome(outcome, withRetries)).toBe("queued");
    expect(stateAfterOutcome(outcome, noRetriesLeft)).toBe("failed");
    expect(stateAfterOutcome(outcome, { ...withRetries, noRetry: true })).toBe("failed");
  });

  it("keeps a cancel from the issue; a worker shutting down puts the task back in the queue", () => {
    expect(stateAfterOutcome("cancelled", { retriesLeft: false, cancelledByUser: true })).toBe("cancelled");
    expect(stateAfterOutcome("cancelled", { retriesLeft: false, cancelledByUser: false })).toBe("queued");
    expect(isRetry("cancelled", "queued")).toBe(false);
    expect(isRetry("failed", "queued")).toBe(true);
    expect(isRetry("failed", "failed")).toBe(false);
  });

  it("without a context is the state the run reports: no retry, a cancel is the user's", () => {
    expect(RUN_OUTCOMES.map((o) => [o, stateAfterOutcome(o)])).toEqual([
      ["pr-opened", "pr-open"],
      ["no-changes", "failed"],
      ["split", "done"],
      ["awaiting-approval", "awaiting-approval"],
      ["waiting", "waiting"],
      ["failed", "failed"],
      ["timeout", "failed"],
      ["stall", "failed"],
      ["cancelled", "cancelled"],
      ["rate-limited", "rate-limited"],
      ["over-budget", "failed"],
    ]);
  });

  it("only ever names a state a running task may move to", () => {
    for (const outcome of RUN_OUTCOMES)
      for (const context of [withRetries, noRetriesLeft, { retriesLeft: true, cancelledByUser: true }])
        for (const from of SLOT_HOLDING_STATES.filter((s) => s !== "dispatched")) {
          const to = stateAfterOutcome(outcome, context);
          // A plan phase ends awaiting approval, never a work phase; pr-open/done follow a work phase.
          if (from === "planning" && (to === "pr-open" || to === "done")) continue;
          if (from === "running" && to === "awaiting-approval") continue;
          expect(canTransition(from, to), `${from} -> ${to} after ${outcome}`).toBe(true);
        }
  });
});

describe("hasRetriesLeft", () => {
  it("counts started runs against retries.max (the first run is not a retry)", () => {
    expect(hasRetriesLeft(1, 2)).toBe(true);
    expect(hasRetriesLeft(2, 2)).toBe(true);
    expect(hasRetriesLeft(3, 2)).toBe(false);
    expect(hasRetriesLeft(1, 0)).toBe(false);
  });
});
