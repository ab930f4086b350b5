import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness.ts";

/**
 * The real Fleet app beside a repository's own CI: CI runs (push, pull_request) come and end around a
 * dispatched task, and Fleet moves only on its own fleet-task run.
 */
const FLEET_YML = "dispatch: actions\nplan_phase: false\nretries: { max: 2, backoff_seconds: 1 }\n";
const TASK_WORKFLOW =
  "name: fleet-task\non:\n  workflow_dispatch:\n    inputs:\n      task_id: { type: string }\n      correlation_id: { type: string }\n      runner_labels: { type: string }\njobs: {}\n";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    files: {
      ".github/fleet.yml": FLEET_YML,
      ".github/workflows/fleet-task.yml": TASK_WORKFLOW,
      ".github/workflows/ci.yml": "name: CI\non: [push, pull_request]\njobs: {}\n",
    },
  });
}, 60_000);
afterAll(async () => {
  await h?.stop();
});

describe("Fleet and the repository's CI runs", () => {
  it("a CI run ending (even failed) leaves the task alone; only the task's own run moves it", async () => {
    const issue = await h.newIssue("Add a changelog");
    await h.label(issue, "fleet:claude");
    await h.settle();
    const [task] = await h.tasks();
    expect(task).toMatchObject({ state: "dispatched", attempts: 1 });
    const taskRun = h.gh.workflowRuns(h.full).find((r) => r.event === "workflow_dispatch")!;
    expect(String(taskRun.id)).toBe(task!.runId);
    // Fleet's state commits started no CI run.
    expect(h.gh.workflowRuns(h.full).filter((r) => r.name === "CI")).toEqual([]);

    // A person pushes: CI runs, and fails.
    await h.mona.rest.repos.createOrUpdateFileContents({
      owner: h.owner,
      repo: h.name,
      path: "NOTES.md",
      message: "Notes",
      content: Buffer.from("notes\n").toString("base64"),
    });
    const ci = h.gh.workflowRuns(h.full).filter((r) => r.name === "CI");
    expect(ci.map((r) => [r.event, r.headBranch, r.actor.login])).toEqual([["push", "main", "mona"]]);
    const rest = h.gh.requests.mark();
    const git = h.gh.gitRequests.mark();
    await h.gh.setWorkflowRunStatus(h.full, ci[0]!.id, "in_progress");
    await h.gh.setWorkflowRunStatus(h.full, ci[0]!.id, "completed", "failure");
    await h.settle();
    // Ignoring it costs the app nothing: a CI run is let go before any request.
    const cost = {
      rest: h.gh.counts({ since: rest }).total,
      git: h.gh.gitRequests.counts({ since: git }).total,
    };
    expect(cost).toEqual({ rest: 0, git: 0 });
    expect((await h.tasks())[0]).toMatchObject({ state: "dispatched", attempts: 1, runId: task!.runId });

    // The task's own run dying without a report does move it (a retry).
    await h.gh.setWorkflowRunStatus(h.full, taskRun.id, "completed", "failure");
    await h.settle();
    const after = (await h.tasks())[0]!;
    expect(after.state).not.toBe("dispatched");
    expect(after.reason ?? "").toMatch(new RegExp(`Actions run ${taskRun.id}`));
  });
});
