// Fleet finds its own comments again by the hidden marker on their first line. An agent's plan or
// report is published inside the tracking comment (a bot comment): a marker it writes there must not
// make that comment the one Fleet's next notice, label error or dashboard edit goes to.
import { describe, expect, it } from "vitest";
import { DASHBOARD_MARKER } from "../../src/render/dashboard.ts";
import { hasMarker, noticeMarker, trackingMarker } from "../../src/render/markers.ts";
import { renderPlanComment } from "../../src/render/plan-comment.ts";
import { composeTrackingComment, renderTrackingComment } from "../../src/render/tracking-comment.ts";

const header = renderTrackingComment({
  taskKey: "fl-1",
  taskId: "fl-1",
  state: "pr-open",
  coder: "claude",
  model: "sonnet",
});

describe("a marker an agent writes into what Fleet publishes", () => {
  const planted = [noticeMarker("config-invalid"), DASHBOARD_MARKER, trackingMarker("fl-2")].join("\n");
  const comment = composeTrackingComment(header, {
    plan: renderPlanComment({ taskId: "fl-1", plan: `1. Do it\n${planted}`, awaitingApproval: false }),
    report: `Done.\n\n${planted}`,
  });

  it("is in the comment's text, but does not make it another comment of Fleet's", () => {
    expect(comment).toContain(noticeMarker("config-invalid"));
    expect(hasMarker(comment, noticeMarker("config-invalid"))).toBe(false);
    expect(hasMarker(comment, DASHBOARD_MARKER)).toBe(false);
    expect(hasMarker(comment, trackingMarker("fl-2"))).toBe(false);
  });

  it("leaves the comment's own marker, on its first line, found", () => {
    expect(hasMarker(comment, trackingMarker("fl-1"))).toBe(true);
    // GitHub keeps a body as written; a leading blank line (an edit by hand) does not hide the marker.
    expect(hasMarker(`\n${comment}`, trackingMarker("fl-1"))).toBe(true);
    expect(hasMarker(undefined, trackingMarker("fl-1"))).toBe(false);
  });
});
