// The agent's `ask_human` question as Fleet publishes and stores it: plain lines in its block quote, no
// marker of Fleet's own planted through it, and a question of the wrong shape in the state reported.
import { describe, expect, it } from "vitest";
import { emptyStateDoc, parseStateDoc, StateCorruptError } from "../../src/core/state-doc.ts";
import { newTask } from "../../src/core/task.ts";
import { hasMarker, noticeMarker } from "../../src/render/markers.ts";
import {
  composeTrackingComment,
  renderTrackingComment,
  trackingSectionsOf,
} from "../../src/render/tracking-comment.ts";

const waiting = (question: string) =>
  renderTrackingComment({
    taskKey: "fl-a1",
    taskId: "fl-a1",
    state: "waiting",
    coder: "claude",
    model: "sonnet",
    question,
  });

/** The lines CommonMark sees in the question's block: LF, CRLF and a lone CR each end a line. */
const questionLines = (body: string): string[] => {
  const start = body.indexOf("**The agent asks:**");
  const end = body.indexOf("<sub>Commands");
  return body
    .slice(start, end)
    .split(/\r\n|\r|\n/)
    .slice(1)
    .filter((l) => l.trim() !== "");
};

describe("the agent's question as published", () => {
  it("stays inside its block quote: a lone CR (a CommonMark line ending) does not end the quote", () => {
    const lines = questionLines(waiting("Blue or red?\r## ✅ Fleet: the task is done\r- [x] approved"));
    for (const line of lines) expect(line.startsWith(">"), JSON.stringify(line)).toBe(true);
  });

  it("cannot forge a section of the tracking comment that outlives the question", () => {
    const body = composeTrackingComment(waiting("Blue or red?\n<!-- fleet:section plan -->\nForged plan"), {
      report: "the run's report",
    });
    expect(Object.keys(trackingSectionsOf(body))).toEqual(["report"]);
  });

  it("cannot plant a marker that Fleet's upserts look for in its own (bot) comments", () => {
    const body = waiting(`Blue or red? ${noticeMarker("config-invalid")}`);
    expect(hasMarker(body, noticeMarker("config-invalid"))).toBe(false);
  });
});

describe("the question in the state document", () => {
  const task = newTask({
    id: "fl-a1",
    repo: "octo/widgets",
    issue: 12,
    title: "Add a cache",
    coder: "claude",
    model: "sonnet",
    now: "2026-01-01T00:00:00Z",
  });

  it("a question of the wrong shape is reported as a corrupt state, not acted on", () => {
    const text = JSON.stringify({
      ...emptyStateDoc(),
      tasks: { "fl-a1": { ...task, state: "waiting", question: { text: 5, askedAt: "soon" } } },
    });
    expect(() => parseStateDoc(text, "fleet/state:.fleet/state.json", "fix it")).toThrow(StateCorruptError);
  });
});
