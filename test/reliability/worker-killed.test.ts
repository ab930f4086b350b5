import { afterAll, describe, expect, it } from "vitest";
import type { FleetServer } from "../../src/app/server.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { claimTask } from "../../src/worker/execute-task.ts";
import { botClient } from "../support/bot-client.ts";
import { type Harness, startAppInstance, startHarness } from "../support/harness.ts";

const SLOT_STATES = new Set(["dispatched", "planning", "running"]);
const busy = (tasks: Task[]) => tasks.filter((t) => SLOT_STATES.has(t.state));

describe("a worker killed mid-run", () => {
  let h: Harness | undefined;
  let app2: FleetServer | undefined;
  afterAll(async () => {
    await app2?.stop();
    await h?.stop();
  });

  it("loses its lease when it stops heartbeating, and the task is retried", async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 1\nretries: { max: 2 }\n" },
    });
    const issue = await h.newIssue("Work that a dying worker picks up");
    await h.label(issue, "fleet:claude");
    let tasks = await h.tasks();
    expect(tasks).toHaveLength(1);
    const dispatched = tasks[0]!;
    expect(dispatched.issue).toBe(issue);
    expect(dispatched.state).toBe("dispatched");
    expect(dispatched.lease?.holder).toBe("dispatch:local");
    expect(dispatched.attempts).toBe(1);

    // A worker claims it, starts running with a 1 s lease, and dies: it never heartbeats again.
    const store = createGitHubStateStore({
      github: githubOverOctokit(await botClient(h.gh, h.full)),
      owner: h.owner,
      repo: h.name,
    });
    const claimed = await claimTask(
      store,
      dispatched.id,
      "local:dead-worker",
      new Date(),
      1000,
      () => "running",
    );
    expect(claimed?.state).toBe("running");
    expect(claimed?.lease?.holder).toBe("local:dead-worker");
    tasks = await h.tasks();
    expect(tasks[0]!.state).toBe("running");

    // The app restarts; its clock is 10 minutes on, long past the lease.
    await h.app.stop();
    const later = new Date(Date.now() + 10 * 60_000);
    app2 = await startAppInstance(h.gh, { clock: () => later });
    await h.comment(issue, "/fleet status");
    // One reconcile expires the dead worker's lease and puts the task back in the queue, backing off
    // retries.backoff_seconds (60 s by default) before the next attempt.
    await app2.reconcile();
    await h.settle();
    tasks = await h.tasks();
    expect(tasks[0]).toMatchObject({
      state: "queued",
      resetAt: new Date(later.getTime() + 60_000).toISOString(),
    });
    expect(tasks[0]!.reason).toMatch(/lease local:dead-worker expired\); retrying after \d\d:\d\d:\d\d UTC$/);
    expect(tasks[0]!.lease).toBeUndefined();
    await app2.stop();

    // Past the backoff, the next pass dispatches it again.
    const afterBackoff = new Date(later.getTime() + 61_000);
    app2 = await startAppInstance(h.gh, { clock: () => afterBackoff });
    await h.comment(issue, "/fleet status");
    await app2.reconcile();
    await h.settle();

    tasks = await h.tasks();
    expect(tasks).toHaveLength(1);
    const retried = tasks[0]!;
    expect(retried.id).toBe(dispatched.id);
    expect(retried.state).toBe("dispatched");
    expect(retried.attempts).toBe(2);
    expect(retried.lease?.holder).toBe("dispatch:local");
    expect(busy(tasks)).toHaveLength(1);
  }, 40_000);
});
