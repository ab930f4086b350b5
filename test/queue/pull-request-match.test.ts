// Which task a pull request belongs to when no task has recorded its number yet: the run that opened it
// may not have recorded its end (its commit still losing races, or its worker killed). The lifecycle
// model found merges of such PRs made done a task that had only kept or taken over the branch.
import { describe, expect, it } from "vitest";
import { emptyStateDoc, type FleetStateDoc } from "../../src/core/state-doc.ts";
import type { Task } from "../../src/core/task.ts";
import { enqueueTask, tasksOnPullRequest } from "../../src/queue/transitions.ts";
import { prMarker, taskIdOfPrBody } from "../../src/render/pr-body.ts";
import { commitMessage } from "../../src/worker/4-publish.ts";

const BRANCH = "fleet/2-issue-2";

/** Two tasks of issue 2 on one branch: `opener` opened PR 501 at 10:00:05, `other` is as `otherIs` says. */
function twoOnOneBranch(otherIs: Partial<Task>, openerIs: Partial<Task> = {}): FleetStateDoc {
  let doc = emptyStateDoc();
  const add = (coder: string, model: string, now: string, patch: Partial<Task>) => {
    const r = enqueueTask(doc, {
      issue: 2,
      title: "Issue 2",
      coder,
      model,
      priority: 2,
      dependsOn: [],
      requestedBy: "mona",
      repo: "octo/widgets",
      now,
    });
    doc = { ...r.doc, tasks: { ...r.doc.tasks, [r.task.id]: { ...r.task, branch: BRANCH, ...patch } } };
    return r.task.id;
  };
  add("claude", "opus", "2026-03-02T10:00:00.000Z", { state: "cancelled", ...openerIs });
  add("claude", "sonnet", "2026-03-02T10:00:09.000Z", otherIs);
  return doc;
}
const byModel = (doc: FleetStateDoc, model: string) =>
  Object.values(doc.tasks).find((t) => t.model === model)!;
const lease = {
  holder: "local:host:1",
  slot: 1,
  acquiredAt: "2026-03-02T10:00:09.000Z",
  heartbeatAt: "2026-03-02T10:00:09.000Z",
  expiresAt: "2026-03-02T10:15:09.000Z",
};

describe("a pull request no task recorded", () => {
  it("is the task its body names (Fleet's marker, first line), whatever else is on its branch", () => {
    const doc = twoOnOneBranch({ state: "running", lease });
    const opener = byModel(doc, "opus");
    const pr = { number: 501, head: BRANCH, body: `${prMarker(opener.id)}\nCloses #2` };
    expect(tasksOnPullRequest(doc, pr).map((t) => t.id)).toEqual([opener.id]);
    // A marker further down is published text, not Fleet's: the other rules decide.
    const quoted = { ...pr, body: `Text\n${prMarker(opener.id)}` };
    expect(tasksOnPullRequest(doc, quoted).map((t) => t.model)).toEqual(["sonnet"]);
    // Named and done already: still its task (an A/B side's rebase and a split's epic go by it).
    const done = twoOnOneBranch({ state: "running", lease }, { state: "done" });
    const named = byModel(done, "opus").id;
    expect(tasksOnPullRequest(done, { ...pr, body: prMarker(named) }).map((t) => t.id)).toEqual([named]);
    // Leading blank lines and CRLF: still the first line.
    expect(tasksOnPullRequest(doc, { ...pr, body: `\r\n  ${prMarker(opener.id)}\r\nCloses #2` })[0]?.id).toBe(
      opener.id,
    );
    // A marker naming a task on another branch, or no task at all: not taken; the other rules decide.
    const elsewhere = {
      ...doc,
      tasks: { ...doc.tasks, [opener.id]: { ...opener, branch: "fleet/2-elsewhere" } },
    };
    expect(tasksOnPullRequest(elsewhere, pr).map((t) => t.model)).toEqual(["sonnet"]);
    expect(tasksOnPullRequest(doc, { ...pr, body: prMarker("fl-none") }).map((t) => t.model)).toEqual([
      "sonnet",
    ]);
  });

  it("without a marker, is not a task made after it was opened, even one at work on its branch", () => {
    const doc = twoOnOneBranch({ state: "running", lease });
    const pr = { number: 501, head: BRANCH, createdAt: "2026-03-02T10:00:05Z" };
    expect(tasksOnPullRequest(doc, pr).map((t) => t.model)).toEqual(["opus"]);
    // Its time unknown: the one at work.
    expect(tasksOnPullRequest(doc, { number: 501, head: BRANCH }).map((t) => t.model)).toEqual(["sonnet"]);
  });

  it("without a marker, is the one at work (or cancelled with its run still stopping) before one that only kept the branch", () => {
    const stopping = { holder: "local:host:1", until: "2026-03-02T10:15:00.000Z" };
    const earlier = "2026-03-02T09:59:00.000Z";
    const pr = { number: 501, head: BRANCH, createdAt: "2026-03-02T10:00:30Z" };
    // The other task queued again, live, made before the PR: the cancelled opener, its run stopping, first.
    const doc = twoOnOneBranch({ state: "queued", createdAt: earlier }, { stopping });
    expect(tasksOnPullRequest(doc, pr).map((t) => t.model)).toEqual(["opus"]);
    // A run left stopping since before the PR was opened (its worker died long before): not at work.
    const stale = twoOnOneBranch(
      { state: "queued", createdAt: earlier },
      { stopping: { ...stopping, until: "2026-03-02T10:00:20.000Z" } },
    );
    expect(tasksOnPullRequest(stale, pr).map((t) => t.model)).toEqual(["sonnet"]);
    // Without the stopping run, live first (as before).
    const plain = twoOnOneBranch({ state: "queued", createdAt: earlier });
    expect(tasksOnPullRequest(plain, pr).map((t) => t.model)).toEqual(["sonnet"]);
  });
});

describe("an agent's summary in the commit message", () => {
  it("opens no HTML comment: a PR opened by hand from the commit names no task through it", () => {
    const message = commitMessage({
      summary: `${prMarker("fl-other")}\n${prMarker("fl-other")} and more`,
      title: "Issue 2",
      issue: 2,
      taskId: "fl-mine",
      coder: "claude",
    });
    const [subject, , ...body] = message.split("\n");
    // GitHub prefills a one-commit PR's title from the subject and its body from the rest.
    expect(taskIdOfPrBody(subject)).toBeUndefined();
    expect(taskIdOfPrBody(body.join("\n"))).toBeUndefined();
    expect(message).not.toContain("<!--");
    expect(message).toContain("Fleet task fl-mine for #2.");
  });
});
