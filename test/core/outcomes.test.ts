import { describe, expect, it } from "vitest";
import { canTransition, SLOT_HOLDING_STATES } from "../../src/core/lifecycle.ts";
import {
  hasRetriesLeft,
  isRetry,
  RUN_OUTCOMES,
  type RunOutcome,
  stateAfterOutcome,
} from "../../src/core/outcomes.ts";

const withRetries = { retriesLeft: true, cancelledByUser: false };
const noRetriesLeft = { retriesLeft: false, cancelledByUser: false };

describe("stateAfterOutcome", () => {
  it.each<[RunOutcome, string]>([
    ["pr-opened", "pr-open"],
    ["no-changes", "done"],
    ["awaiting-approval", "awaiting-approval"],
    ["rate-limited", "rate-limited"],
    ["over-budget", "failed"],
  ])("%s -> %s, retries left or not", (outcome, state) => {
    expect(stateAfterOutcome(outcome, withRetries)).toBe(state);
    expect(stateAfterOutcome(outcome, noRetriesLeft)).toBe(state);
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
      ["no-changes", "done"],
      ["awaiting-approval", "awaiting-approval"],
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
