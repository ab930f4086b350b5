// The app across many repositories: one real app process (built, plain node: bench/lib/app-child.ts)
// for `owners` x `perOwner` installed repositories on the offline GitHub (one installation per owner),
// `tasks` labels queued in each through webhooks (dispatch: local, no worker: the tasks wait).
// Measured: the app's RSS with all of them loaded; a reconcile sweep's REST requests per repository,
// the first (full: every live task's issue is read) and the next ones (nothing changed: one listing of
// what changed since); and how long a label waits behind the other repositories' work: one label in
// every repository at once, sent while a sweep runs, each from its delivery to its tracking comment.
// Run alone: npx tsx bench/scale-app.ts [--owners=10] [--per-owner=10] [--tasks=20]
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { buildApp } from "../scripts/build-app.mjs";
import { FLEET_APP } from "../test/support/fleet-app.ts";
import { round } from "./lib/route-timer.ts";
import { percentile } from "./lib/state-history.ts";
import { branchStateReader } from "./lib/state-watch.ts";

const CHILD = join(import.meta.dirname, "lib/app-child.ts");
// Inside the repository, so the child's packages resolve from node_modules (they stay external).
const BUILT = join(import.meta.dirname, "results/tmp/app-child.mjs");

export interface ScaleAppOptions {
  owners: number;
  perOwner: number;
  tasks: number;
}

export interface ScaleAppResult extends ScaleAppOptions {
  repositories: number;
  queuedTasks: number;
  rssMB: { started: number; loaded: number; afterSweeps: number; max: number };
  heapUsedMB: number;
  /** REST requests (and git requests, the state branch's) per repository per sweep. */
  sweep: {
    first: { restPerRepo: number; gitPerRepo: number; ms: number };
    unchanged: { restPerRepo: number; gitPerRepo: number; ms: number; byRoute: Record<string, number> };
  };
  /** One label in every repository at once, during a sweep: delivery sent -> its tracking comment. */
  labelWaitMs: { p50: number; p99: number; max: number; n: number };
  queueingMs: number;
  load: { before: number; max: number; after: number };
}

const flag = (name: string, dflt: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? dflt;

export async function runScaleApp(o: ScaleAppOptions): Promise<ScaleAppResult> {
  await mkdir(join(import.meta.dirname, "results/tmp"), { recursive: true });
  await buildApp({ entry: CHILD, outfile: BUILT });
  const gh = await startGitHubEmulator(FLEET_APP);
  const loads = [loadavg()[0]!];
  const loadTimer = setInterval(() => loads.push(loadavg()[0]!), 5_000);
  const repos: Array<{ owner: string; name: string; full: string; gitDir: string }> = [];
  for (let a = 1; a <= o.owners; a++)
    for (let r = 1; r <= o.perOwner; r++) {
      const owner = `org-${a}`;
      const name = `repo-${r}`;
      const { gitDir } = await gh.createRepo({
        owner,
        name,
        files: { "README.md": "# r\n", ".github/fleet.yml": "dispatch: local\nmax_concurrent: 3\n" },
      });
      gh.addCollaborator(`${owner}/${name}`, "mona", "write");
      repos.push({ owner, name, full: `${owner}/${name}`, gitDir });
    }
  const child = spawn(
    process.execPath,
    [
      BUILT,
      JSON.stringify({
        appId: gh.appId,
        privateKey: gh.privateKey,
        webhookSecret: gh.webhookSecret,
        baseUrl: gh.url,
      }),
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const ask = async (command?: string): Promise<Record<string, unknown>> => {
    if (command) child.stdin!.write(`${command}\n`);
    const { value, done } = await lines.next();
    if (done) throw new Error("the app process ended");
    return JSON.parse(value as string);
  };
  const rssSeen: number[] = [];
  const memory = async () => {
    const m = (await ask("memory")) as { rssMB: number; heapUsedMB: number };
    rssSeen.push(m.rssMB);
    return m;
  };
  try {
    const { ready } = (await ask()) as { ready: string };
    gh.setWebhookUrl(ready);
    const started = await memory();
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona") });

    // Every repository's labels, the repositories side by side; GitHub's deliveries as the emulator sends them.
    const q0 = Date.now();
    await Promise.all(
      repos.map(async (r) => {
        for (let i = 1; i <= o.tasks; i++) {
          const { data } = await mona.rest.issues.create({
            owner: r.owner,
            repo: r.name,
            title: `Task ${i}`,
          });
          await mona.rest.issues.addLabels({
            owner: r.owner,
            repo: r.name,
            issue_number: data.number,
            labels: ["fleet:claude"],
          });
        }
      }),
    );
    await gh.waitForDeliveries();
    await ask("idle");
    const readers = repos.map((r) => branchStateReader(r.gitDir));
    const countTasks = async () => {
      let n = 0;
      for (const read of readers) n += Object.keys((await read()) ?? {}).length;
      return n;
    };
    let queued = await countTasks();
    for (let i = 0; queued < repos.length * o.tasks && i < 60; i++) {
      await new Promise((res) => setTimeout(res, 2_000));
      queued = await countTasks();
    }
    const queueingMs = Date.now() - q0;
    const loaded = await memory();

    const sweep = async () => {
      const mark = gh.requests.mark();
      const gitMark = gh.gitRequests.mark();
      const { reconciled } = (await ask("reconcile")) as { reconciled: number };
      const fleet = gh.requests.entries.filter(
        (e) => e.seq > mark && (e.actor === gh.botLogin || e.actor === "app"),
      );
      const byRoute: Record<string, number> = {};
      for (const e of fleet) byRoute[e.route] = (byRoute[e.route] ?? 0) + 1;
      return {
        restPerRepo: round(fleet.length / repos.length, 2),
        gitPerRepo: round(gh.gitRequests.counts({ since: gitMark }).total / repos.length, 2),
        ms: reconciled,
        byRoute,
      };
    };
    const { byRoute: _full, ...first } = await sweep();
    await sweep();
    const unchanged = await sweep();

    // One new label per repository, all delivered at once while a sweep runs.
    gh.setWebhookUrl(undefined);
    const before = gh.deliveries().length;
    for (const r of repos) {
      const { data } = await mona.rest.issues.create({ owner: r.owner, repo: r.name, title: "One more" });
      await mona.rest.issues.addLabels({
        owner: r.owner,
        repo: r.name,
        issue_number: data.number,
        labels: ["fleet:claude"],
      });
    }
    const labeled = gh
      .deliveries()
      .slice(before)
      .filter((d) => d.event === "issues" && d.action === "labeled");
    gh.setWebhookUrl(ready);
    const mark = gh.requests.mark();
    const sentAt = new Map<string, number>();
    const sweeping = ask("reconcile");
    await Promise.all(
      labeled.map(async (d) => {
        const p = d.payload as { issue: { number: number }; repository: { full_name: string } };
        const body = JSON.stringify(d.payload);
        sentAt.set(`${p.repository.full_name}#${p.issue.number}`, Date.now());
        const res = await fetch(ready, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-github-event": "issues",
            "x-github-delivery": `${d.id}-wait`,
            "x-hub-signature-256": `sha256=${createHmac("sha256", gh.webhookSecret).update(body).digest("hex")}`,
          },
          body,
        });
        await res.text();
      }),
    );
    await sweeping;
    await ask("idle");
    const waits: number[] = [];
    for (const e of gh.requests.entries) {
      if (e.seq <= mark || e.method !== "POST") continue;
      const m = /^\/repos\/([^/]+\/[^/]+)\/issues\/(\d+)\/comments$/.exec(e.path);
      const sent = m ? sentAt.get(`${m[1]}#${m[2]}`) : undefined;
      if (sent !== undefined) {
        waits.push(e.at - sent);
        sentAt.delete(`${m![1]}#${m![2]}`);
      }
    }
    const after = await memory();
    return {
      ...o,
      repositories: repos.length,
      queuedTasks: queued,
      rssMB: {
        started: started.rssMB,
        loaded: loaded.rssMB,
        afterSweeps: after.rssMB,
        max: Math.max(...rssSeen),
      },
      heapUsedMB: after.heapUsedMB,
      sweep: { first, unchanged },
      labelWaitMs: {
        p50: round(percentile(waits, 50), 0),
        p99: round(percentile(waits, 99), 0),
        max: waits.length ? Math.round(Math.max(...waits)) : Number.NaN,
        n: waits.length,
      },
      queueingMs,
      load: {
        before: round(loads[0]!, 2),
        max: round(Math.max(...loads), 2),
        after: round(loadavg()[0]!, 2),
      },
    };
  } finally {
    clearInterval(loadTimer);
    child.kill("SIGTERM");
    await gh.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runScaleApp({
    owners: Number(flag("owners", "10")),
    perOwner: Number(flag("per-owner", "10")),
    tasks: Number(flag("tasks", "20")),
  });
  console.log(JSON.stringify(r, null, 2));
  await saveFigures(r);
  process.exit(0);
}

/** `--out=FILE`: the figures as JSON there too (bench/scale.ts reads them). */
async function saveFigures(r: unknown): Promise<void> {
  const out = process.argv.find((a) => a.startsWith("--out="))?.slice("--out=".length);
  if (!out) return;
  const { mkdir, writeFile } = await import("node:fs/promises");
  const { dirname } = await import("node:path");
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(r, null, 2)}\n`);
}
