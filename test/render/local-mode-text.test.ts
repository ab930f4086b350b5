// Local mode has no comments to read commands from and a `fleet merge` that merges: its texts name
// the `fleet` commands, never the `/fleet` ones, and never say Fleet does not merge.
import { describe, expect, it } from "vitest";
import { renderPlanComment } from "../../src/render/plan-comment.ts";
import { renderPrBody } from "../../src/render/pr-body.ts";
import {
  describeState,
  renderTrackingComment,
  type TrackingView,
} from "../../src/render/tracking-comment.ts";

const view: TrackingView = {
  taskKey: "fl-7",
  taskId: "fl-7",
  state: "awaiting-approval",
  coder: "claude",
  model: "sonnet",
};

describe("local mode's texts", () => {
  it("the plan asks for `fleet approve <id>`; on GitHub for `/fleet approve`", () => {
    const local = renderPlanComment({
      taskId: "fl-7",
      plan: "1. Do it",
      awaitingApproval: true,
      local: true,
    });
    expect(local).toContain("`fleet approve fl-7`");
    expect(local).not.toContain("/fleet");
    const github = renderPlanComment({ taskId: "fl-7", plan: "1. Do it", awaitingApproval: true });
    expect(github).toContain("`/fleet approve`");
  });

  it("the tracking comment has no `/fleet` footer, and its state line names `fleet approve <id>`", () => {
    const local = renderTrackingComment({ ...view, local: true });
    expect(local).not.toContain("/fleet");
    expect(local).not.toContain("Commands:");
    expect(describeState({ ...view, local: true })).toBe(
      "awaiting approval: run `fleet approve fl-7` to start the work",
    );
    const github = renderTrackingComment(view);
    expect(github).toContain("<sub>Commands: `/fleet status`");
    expect(describeState(view)).toContain("comment `/fleet approve`");
  });

  it("the PR body says `fleet merge <id>` merges it, not that Fleet never merges", () => {
    const pr = { taskId: "fl-7", issue: 3, coder: "claude", model: "sonnet", summary: "Did it" };
    const local = renderPrBody({ ...pr, local: true });
    expect(local).toContain("`fleet merge fl-7` merges it");
    expect(local).not.toContain("never merges");
    expect(renderPrBody(pr)).toContain("Fleet never merges");
  });
});
