import { createHmac } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FleetServer } from "../../src/app/server.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { readFleetConfig } from "../../src/github/read-config.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue } from "../../src/queue/repo-queue.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { claimTask } from "../../src/worker/execute-task.ts";
import { botClient } from "../support/bot-client.ts";
import { type Harness, startAppInstance, startHarness } from "../support/harness.ts";
import { dispatchCounts, stateHistory } from "../support/state-history.ts";

const CAP = 3;
const ISSUES = 8;
const SLOT_STATES = new Set(["dispatched", "planning", "running"]);

describe("two app instances and two workers writing one repository's state at once", () => {
  let h: Harness;
  let appB: FleetServer | undefined;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": `dispatch: local\nmax_concurrent: ${CAP}\n` } });
    appB = await startAppInstance(h.gh);
  });
  afterAll(async () => {
    await appB?.stop();
    await h?.stop();
  });

  it("loses no update and never grants more slots than the cap, by every commit of the state branch", async () => {
    // Labels recorded while no one listens; then every delivery goes to BOTH instances at once.
    h.gh.setWebhookUrl(undefined);
    const issues: number[] = [];
    for (let i = 1; i <= ISSUES; i++) issues.push(await h.newIssue(`Storm ${i}`));
    for (const n of issues)
      await h.mona.rest.issues.addLabels({
        owner: h.owner,
        repo: h.name,
        issue_number: n,
        labels: ["fleet:claude"],
      });
    await h.gh.waitForDeliveries();
    const labeled = h.gh.deliveries().filter((d) => d.event === "issues" && d.action === "labeled");
    expect(labeled).toHaveLength(ISSUES);
    const post = async (url: string, d: (typeof labeled)[number]) => {
      const body = JSON.stringify(d.payload);
      const res = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": d.event,
          "x-github-delivery": d.id,
          "x-hub-signature-256": `sha256=${createHmac("sha256", h.gh.webhookSecret).update(body).digest("hex")}`,
        },
        body,
      });
      expect(res.status).toBeLessThan(300);
    };

    // Two workers race for every dispatched task and finish what they win, each through its own store.
    const github = githubOverOctokit(await botClient(h.gh, h.full));
    const config = await readFleetConfig(github, { owner: h.owner, repo: h.name });
    if (!config.ok) throw new Error("config");
    const claims = new Map<string, string[]>();
    const finished = new Map<string, string>();
    const lost: string[] = [];
    let stop = false;
    const runWorker = async (holder: string) => {
      const store = createGitHubStateStore({ github, owner: h.owner, repo: h.name });
      const queue = createRepoQueue({
        repo: h.full,
        store,
        fileConfig: config.config,
        dispatcher: localDispatcher,
      });
      while (!stop && finished.size < ISSUES) {
        const tasks = Object.values((await store.read()).doc.tasks);
        const waiting = tasks.filter((t) => t.state === "dispatched");
        for (const t of waiting) {
          const won = await claimTask(store, t.id, holder, new Date(), 600_000, () => "running");
          if (!won) continue;
          claims.set(t.id, [...(claims.get(t.id) ?? []), holder]);
          const moved = await queue.move(t.issue, "done", { taskId: t.id, from: ["running"] });
          // A claim this worker won must still be there when it finishes (no lost update).
          if (moved.length !== 1) {
            const now = (await createGitHubStateStore({ github, owner: h.owner, repo: h.name }).read()).doc;
            lost.push(`${holder} won ${t.id} but could not finish it: ${JSON.stringify(now.tasks[t.id])}`);
          }
          finished.set(t.id, holder);
        }
        if (waiting.length === 0) await new Promise((r) => setTimeout(r, 50));
      }
    };
    const workers = Promise.all([runWorker("local:w1"), runWorker("local:w2")]);
    await Promise.all(labeled.flatMap((d) => [post(h.app.webhookUrl, d), post(appB!.webhookUrl, d)]));
    await h.app.idle();
    await appB!.idle();
    // Real time on a shared 2-core machine: room for it to be loaded several times over.
    const deadline = setTimeout(() => {
      stop = true;
    }, 100_000);
    await workers;
    clearTimeout(deadline);
    expect(lost).toEqual([]);
    expect(finished.size).toBe(ISSUES);

    // The end state: one task per issue, each done, each run claimed by exactly one worker, no lease left.
    const tasks: Task[] = await h.tasks();
    expect(tasks).toHaveLength(ISSUES);
    for (const n of issues) expect(tasks.filter((t) => t.issue === n)).toHaveLength(1);
    for (const t of tasks) {
      expect(t.state).toBe("done");
      expect(t.lease).toBeUndefined();
      expect(t.attempts).toBe(1);
      expect(claims.get(t.id)).toHaveLength(1);
    }

    // Every commit of the state branch: never more than the cap in slots, each slot held once,
    // and every task dispatched exactly once across all writers.
    const history = await stateHistory(fileURLToPath(h.cloneUrl));
    expect(history.length).toBeGreaterThan(ISSUES);
    for (const { sha, doc } of history) {
      const busy = Object.values(doc.tasks).filter((t) => SLOT_STATES.has(t.state));
      expect(busy.length, `slots in use at ${sha}`).toBeLessThanOrEqual(CAP);
      const slots = busy.map((t) => t.lease?.slot);
      expect(new Set(slots).size, `distinct slots at ${sha}`).toBe(slots.length);
    }
    const dispatched = dispatchCounts(history);
    expect(dispatched.size).toBe(ISSUES);
    expect([...dispatched.values()].every((n) => n === 1)).toBe(true);
  }, 150_000);
});
