// Burst: 500 labeled issues delivered within 10 s to the real app on the offline GitHub. Two latencies:
// the answer to each delivery (the app answers on receipt, src/app/deliveries.ts) and the time from a
// label's delivery to its tracking comment (the task committed to the state and shown on the issue)
// (dispatch: local, max_concurrent: 10, no worker: nothing claims). Deliveries are posted concurrently,
// as GitHub does (the emulator's own sender is serial per repository), signed with the webhook secret.
// Run alone: npx tsx bench/burst.ts [--issues=500] [--seconds=10]
import { createHmac } from "node:crypto";
import { startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { startFleetServer } from "../src/app/server.ts";
import { round } from "./lib/route-timer.ts";
import { percentile, readStateHistory } from "./lib/state-history.ts";

export interface BurstResult {
  issues: number;
  overSeconds: number;
  cap: number;
  handlerP50Ms: number;
  handlerP99Ms: number;
  handlerMaxMs: number;
  /**
   * From a label's delivery to its tracking comment (the task committed to the state, then shown on
   * the issue): how long a person waits to see the task queued. Deliveries are answered before this.
   */
  labelToTrackingP50Ms: number;
  labelToTrackingP99Ms: number;
  /**
   * Answers sent after Probot's 9 s timeout (202 "still processing"); the app answers on receipt, so
   * this stays 0 unless something holds the answer itself.
   */
  answeredStillProcessing: number;
  failedDeliveries: number;
  settledMs: number;
  tasks: number;
  duplicateTasks: number;
  dispatched: number;
  maxRunning: number;
  overCapCommits: number;
  stateCommits: number;
  restPerTask: number;
  contentCreatingPerTask: number;
  /** Git smart-HTTP requests per task (the state branch's fetches and pushes): not REST. */
  gitPerTask: number;
  trackingComments: number;
  byRoute: Record<string, number>;
}

const flag = (name: string, dflt: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt);

export async function runBurst(
  opts: { issues?: number; seconds?: number; cap?: number } = {},
): Promise<BurstResult> {
  const issues = opts.issues ?? 500;
  const seconds = opts.seconds ?? 10;
  const cap = opts.cap ?? 10;
  const gh = await startGitHubEmulator({ appSlug: "fleet", appName: "Fleet" });
  const owner = "octo-org";
  const name = "burst";
  const full = `${owner}/${name}`;
  const { gitDir } = await gh.createRepo({
    owner,
    name,
    files: { "README.md": "# burst\n", ".github/fleet.yml": `dispatch: local\nmax_concurrent: ${cap}\n` },
  });
  gh.addCollaborator(full, "mona", "write");
  const app = await startFleetServer({
    appId: gh.appId,
    privateKey: gh.privateKey,
    webhookSecret: gh.webhookSecret,
    baseUrl: gh.url,
    resilient: false,
    logLevel: "fatal",
    trackerIntervalMs: 0,
  });
  try {
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona") });
    // Record the label deliveries without sending them; they go out below, all within `seconds`.
    gh.setWebhookUrl(undefined);
    for (let i = 0; i < issues; i++) {
      const { data } = await mona.rest.issues.create({ owner, repo: name, title: `Burst task ${i + 1}` });
      await mona.rest.issues.addLabels({
        owner,
        repo: name,
        issue_number: data.number,
        labels: ["fleet:claude"],
      });
    }
    const labeled = gh.deliveries().filter((d) => d.event === "issues" && d.action === "labeled");
    const mark = gh.requests.mark();
    const gitMark = gh.gitRequests.mark();
    const latencies: number[] = [];
    // When each issue's label was sent (epoch ms, as the emulator's request log stamps requests).
    const sentAt = new Map<number, number>();
    let stillProcessing = 0;
    let failed = 0;
    const started = performance.now();
    const sends = labeled.map(async (d, i) => {
      await new Promise((r) => setTimeout(r, (i * seconds * 1000) / labeled.length));
      const body = JSON.stringify(d.payload);
      const t0 = performance.now();
      sentAt.set((d.payload as { issue: { number: number } }).issue.number, Date.now());
      const res = await fetch(app.webhookUrl, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "issues",
          "x-github-delivery": d.id,
          "x-hub-signature-256": `sha256=${createHmac("sha256", gh.webhookSecret).update(body).digest("hex")}`,
        },
        body,
      });
      const text = await res.text();
      latencies.push(performance.now() - t0);
      if (res.status === 202 && text.includes("still processing")) stillProcessing++;
      else if (res.status >= 300) failed++;
    });
    await Promise.all(sends);
    // The app may still be working after a 202: wait until every issue has its task and the state is quiet.
    let lastCount = -1;
    let quietSince = performance.now();
    for (;;) {
      const n = gh.requests.mark();
      if (n !== lastCount) {
        lastCount = n;
        quietSince = performance.now();
      } else if (performance.now() - quietSince > 3000) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const settledMs = performance.now() - started;
    const toTracking: number[] = [];
    for (const r of gh.requests.entries) {
      if (r.seq <= mark || r.method !== "POST") continue;
      const issue = Number(/\/issues\/(\d+)\/comments$/.exec(r.path)?.[1]);
      const sent = sentAt.get(issue);
      if (sent !== undefined) toTracking.push(r.at - sent);
    }
    const counts = gh.counts({ since: mark });
    const history = await readStateHistory(gitDir, cap);
    const perIssue = new Map<number, number>();
    for (const t of history.finalTasks) perIssue.set(t.issue, (perIssue.get(t.issue) ?? 0) + 1);
    let tracking = 0;
    for (let i = 1; i <= issues * 2; i++)
      tracking += gh.comments(full, i).filter((c) => c.body.includes("fleet:tracking")).length;
    return {
      issues,
      overSeconds: seconds,
      cap,
      handlerP50Ms: round(percentile(latencies, 50)),
      handlerP99Ms: round(percentile(latencies, 99)),
      handlerMaxMs: round(Math.max(...latencies)),
      labelToTrackingP50Ms: round(percentile(toTracking, 50)),
      labelToTrackingP99Ms: round(percentile(toTracking, 99)),
      answeredStillProcessing: stillProcessing,
      failedDeliveries: failed,
      settledMs: Math.round(settledMs),
      tasks: history.finalTasks.length,
      duplicateTasks: [...perIssue.values()].filter((n) => n > 1).length,
      dispatched: history.finalTasks.filter((t) => t.state === "dispatched").length,
      maxRunning: history.maxRunning,
      overCapCommits: history.overCap.length,
      stateCommits: history.commits,
      restPerTask: round(counts.total / issues),
      contentCreatingPerTask: round(counts.contentCreating / issues),
      gitPerTask: round(gh.gitRequests.counts({ since: gitMark }).total / issues),
      trackingComments: tracking,
      byRoute: counts.byRoute,
    };
  } finally {
    await app.stop();
    await gh.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runBurst({ issues: flag("issues", 500), seconds: flag("seconds", 10) });
  console.log(JSON.stringify(r, null, 2));
}
