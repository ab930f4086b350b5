import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { execa, type ResultPromise } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import type { FleetServer } from "../../src/app/server.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { waitFor } from "../support/bot-client.ts";
import { FLEET_APP } from "../support/fleet-app.ts";
import { startAppInstance } from "../support/harness.ts";
import { dispatchCounts, stateHistory } from "../support/state-history.ts";

const SLOT_STATES = new Set(["dispatched", "planning", "running"]);
const CAP = 2;
const ISSUES = 8;

describe("the app killed in the middle of a burst of labels", () => {
  let gh: GitHubEmulator | undefined;
  let child: ResultPromise | undefined;
  let app2: FleetServer | undefined;
  afterAll(async () => {
    child?.kill("SIGKILL");
    await app2?.stop();
    await gh?.stop();
  });

  it("a new instance's reconcile queues every labeled issue once, under the cap, with no stray lease", async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    const owner = "octo-org";
    const repo = "widgets";
    const full = `${owner}/${repo}`;
    const { gitDir } = await gh.createRepo({
      owner,
      name: repo,
      files: { "README.md": "# widgets\n", ".github/fleet.yml": `dispatch: local\nmax_concurrent: ${CAP}\n` },
    });
    gh.addCollaborator(full, "mona", "write");
    gh.addCollaborator(full, "mallory", "read");
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona") });
    const mallory = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mallory") });
    const issues: number[] = [];
    for (let i = 1; i <= ISSUES; i++) {
      issues.push((await mona.rest.issues.create({ owner, repo, title: `Burst ${i}` })).data.number);
    }
    // A reader's issue, labeled while the app is down: reconcile must not queue it either.
    const readers = (await mona.rest.issues.create({ owner, repo, title: "Labeled by a reader" })).data
      .number;
    await gh.waitForDeliveries();

    // The real app in its own process.
    child = execa(
      "node",
      [
        "--import",
        "tsx",
        "test/support/app-process.ts",
        JSON.stringify({
          appId: gh.appId,
          privateKey: gh.privateKey,
          webhookSecret: gh.webhookSecret,
          baseUrl: gh.url,
        }),
      ],
      { reject: false, buffer: false },
    );
    const webhookUrl = await new Promise<string>((resolve, reject) => {
      let out = "";
      let err = "";
      child!.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /READY (\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child!.stderr!.on("data", (d: Buffer) => {
        err += d.toString();
      });
      void child!.then(() => reject(new Error(`the app process exited early: ${err}`)));
    });
    gh.setWebhookUrl(webhookUrl);

    // The app answers each delivery on receipt and handles it after. Every handler asks for the labeler's
    // permission: slowed, so labels answered just before the kill are still being handled when it comes.
    gh.faults.inject({
      route: "GET /repos/{owner}/{repo}/collaborators/{username}/permission",
      latencyMs: 1_500,
    });
    const reader = createGitHubStateStore({ github: githubOverOctokit(mona), owner, repo });
    const taskCount = async () => Object.keys((await reader.read()).doc.tasks).length;
    const labeled = () => gh!.deliveries().filter((d) => d.event === "issues" && d.action === "labeled");
    const half = issues.slice(0, ISSUES / 2);
    for (const n of half)
      await mona.rest.issues.addLabels({ owner, repo, issue_number: n, labels: ["fleet:claude"] });
    await waitFor("the first labels handled", async () => (await taskCount()) >= half.length, 30_000);
    for (const n of issues.slice(ISSUES / 2))
      await mona.rest.issues.addLabels({ owner, repo, issue_number: n, labels: ["fleet:claude"] });
    await waitFor(
      "every label answered",
      async () => labeled().every((d) => typeof d.status === "number"),
      30_000,
    );
    child.kill("SIGKILL");
    await child;
    await mallory.rest.issues
      .addLabels({ owner, repo, issue_number: readers, labels: ["fleet:claude"] })
      .catch(() => undefined);
    await gh.waitForDeliveries();
    gh.faults.clear();
    // The kill really lost work: labels GitHub saw answered (200) have no task.
    expect(labeled().filter((d) => d.status === 200)).toHaveLength(ISSUES);
    expect(await taskCount()).toBeLessThan(ISSUES);

    // A new instance comes up; GitHub does not resend failed deliveries, reconcile must find them.
    app2 = await startAppInstance(gh);
    await app2.reconcile();
    await gh.waitForDeliveries();
    await app2.idle();
    await app2.reconcile();

    const tasks: Task[] = Object.values((await reader.read()).doc.tasks);
    for (const n of issues) {
      expect(
        tasks.filter((t) => t.issue === n),
        `tasks of #${n}`,
      ).toHaveLength(1);
    }
    expect(tasks.some((t) => t.issue === readers)).toBe(false);
    expect(tasks).toHaveLength(ISSUES);

    // Running never above the cap; every lease belongs to a task holding a slot, each slot once.
    const busy = tasks.filter((t) => SLOT_STATES.has(t.state));
    expect(busy).toHaveLength(CAP);
    const leased = tasks.filter((t) => t.lease);
    expect(leased.every((t) => SLOT_STATES.has(t.state))).toBe(true);
    expect(new Set(leased.map((t) => t.lease!.slot)).size).toBe(leased.length);
    expect(tasks.every((t) => t.attempts <= 1)).toBe(true);

    // Nothing dispatched twice, and never more than the cap at once, by every commit of the state branch.
    const history = await stateHistory(gitDir);
    for (const { sha, doc } of history) {
      const inUse = Object.values(doc.tasks).filter((t) => SLOT_STATES.has(t.state));
      expect(inUse.length, `slots in use at ${sha}`).toBeLessThanOrEqual(CAP);
    }
    const dispatched = dispatchCounts(history);
    expect(dispatched.size).toBe(CAP);
    expect([...dispatched.values()].every((n) => n === 1)).toBe(true);

    // At most one tracking comment per issue, even for the label that was being handled at the kill.
    for (const n of issues) {
      const tracking = gh
        .comments(full, n)
        .filter((c) => c.user.type === "Bot" && c.body.includes("fleet:tracking"));
      expect(tracking.length, `tracking comments of #${n}`).toBeLessThanOrEqual(1);
    }
  }, 60_000);
});
