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
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { buildApp } from "../scripts/build-app.mjs";
import { nodeFlagsFor } from "../scripts/node-flags.mjs";
import { limitRequestsPerToken } from "../src/github/concurrency-limit.ts";
import { FLEET_APP } from "../test/support/fleet-app.ts";
import { readGitLog, shimFolder } from "./lib/fleet-processes.ts";
import { round } from "./lib/route-timer.ts";
import { saveFigures } from "./lib/save-figures.ts";
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
  /** The node flags the app ran with (`fleet serve`'s, unless BENCH_APP_NODE_ARGS). */
  nodeFlags: string[];
  /** `max`: the process's peak resident memory (VmHWM), bursts between the readings included. */
  rssMB: { started: number; loaded: number; afterSweeps: number; max: number };
  heapUsedMB: number;
  /** After the sweeps: V8's reserved heap, and the memory outside it that V8 knows of (Buffers). */
  heapTotalMB?: number;
  externalMB?: number;
  arrayBuffersMB?: number;
  /** After the sweeps: the RSS by kind of mapping (malloc's main arena, anonymous, files). */
  residentMB?: { brkHeap: number; anonymous: number; files: number };
  /** V8's spaces as committed once the burst is queued (the young generation's share of the RSS). */
  heapSpacesLoadedMB?: Record<string, number>;
  /** REST requests (and git requests, the state branch's) per repository per sweep. */
  sweep: {
    first: { restPerRepo: number; gitPerRepo: number; ms: number };
    unchanged: { restPerRepo: number; gitPerRepo: number; ms: number; byRoute: Record<string, number> };
  };
  /** One label in every repository at once: delivery sent -> its tracking comment, with nothing else going on. */
  labelWaitQuietMs: Wait;
  /** The same during a reconcile sweep. */
  labelWaitMs: Wait;
  queueingMs: number;
  /** The most REST requests the app had in flight at once with one installation's token (GitHub refuses beyond 100). */
  peakInFlightPerInstallation?: number;
  load: { before: number; max: number; after: number };
}

/** CPU time of a process so far (ms), from /proc. */
function cpuOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

interface Wait {
  p50: number;
  p99: number;
  max: number;
  n: number;
  appCpuPct: number;
  emulatorCpuPct: number;
  /** The app's git pushes of the state branch in the wave (each label's commit): the emulator answers them. */
  statePushP50Ms: number;
  /** How late the emulator's event loop ran in the wave (it answers the app's requests and forks a git backend per git request). */
  emulatorLoopLagMs: { mean: number; p99: number; max: number };
  emulatorRssMB: number;
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
  const scratch = await mkdtemp(join(tmpdir(), "fleet-bench-app-"));
  const gitLog = join(scratch, "git.log");
  const shims = await shimFolder(join(scratch, "shims"), {
    bwrapLog: join(scratch, "bwrap.log"),
    standIn: false,
    gitLog,
  });
  const pushesIn = (from: number, to: number) =>
    readGitLog(gitLog)
      .filter((g) => / push /.test(` ${g.args} `) && g.atMs >= from && g.atMs <= to)
      .map((g) => g.endMs - g.atMs);
  const nodeFlags = process.env.BENCH_APP_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? nodeFlagsFor("serve");
  const child = spawn(
    process.execPath,
    [
      // The node flags `fleet serve` runs with (scripts/node-flags.mjs); BENCH_APP_NODE_ARGS="…" others
      // (README, the app's RSS).
      ...nodeFlags,
      BUILT,
      JSON.stringify({
        appId: gh.appId,
        privateKey: gh.privateKey,
        webhookSecret: gh.webhookSecret,
        baseUrl: gh.url,
      }),
    ],
    {
      stdio: ["pipe", "pipe", "inherit"],
      // A git shim first on the app's PATH: how long each of its state pushes took (answered by the emulator).
      env: {
        ...process.env,
        PATH: `${shims}:${process.env.PATH}`,
        // BENCH_APP_MALLOC_ARENA_MAX=<n>: the app with glibc's malloc held to n arenas (README, the app's RSS).
        ...(process.env.BENCH_APP_MALLOC_ARENA_MAX
          ? { MALLOC_ARENA_MAX: process.env.BENCH_APP_MALLOC_ARENA_MAX }
          : {}),
      },
    },
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
    const m = (await ask("memory")) as {
      rssMB: number;
      peakRssMB: number;
      heapUsedMB: number;
      heapTotalMB: number;
      externalMB: number;
      arrayBuffersMB: number;
      residentMB: { brkHeap: number; anonymous: number; files: number };
      heapSpacesMB: Record<string, number>;
    };
    rssSeen.push(m.rssMB, m.peakRssMB);
    return m;
  };
  try {
    const { ready } = (await ask()) as { ready: string };
    gh.setWebhookUrl(ready);
    const started = await memory();
    // One person labelling in every repository side by side, within GitHub's 100 requests in flight.
    const mona = new Octokit({
      baseUrl: gh.url,
      auth: gh.userToken("mona"),
      request: { fetch: limitRequestsPerToken(fetch, 50) },
    });

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

    // One new label per repository, all delivered at once: with nothing else going on, then while a sweep runs.
    const labelWave = async (title: string, duringSweep: boolean) => {
      gh.setWebhookUrl(undefined);
      const before = gh.deliveries().length;
      for (const r of repos) {
        const { data } = await mona.rest.issues.create({ owner: r.owner, repo: r.name, title });
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
      const wave0 = Date.now();
      // The emulator's event loop (this process): what its answers wait behind, spawns of its git backends included.
      const lag = monitorEventLoopDelay({ resolution: 10 });
      lag.enable();
      const cpu0 = { bench: process.cpuUsage(), app: cpuOf(child.pid!) };
      const sweeping = duringSweep ? ask("reconcile") : Promise.resolve();
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
        const key = m ? `${m[1]}#${m[2]}` : "";
        const sent = sentAt.get(key);
        if (sent !== undefined) {
          waits.push(e.at - sent);
          sentAt.delete(key);
        }
      }
      // BENCH_DEBUG: the wave's requests (REST and git), each with its time after the wave began.
      if (process.env.BENCH_DEBUG) {
        const rest = gh.requests.entries.filter((e) => e.seq > mark);
        const gits = gh.gitRequests.entries.filter((e) => e.at >= wave0 - 100);
        const lines = [
          ...rest.map((e) => [e.at, `${e.actor} ${e.method} ${e.path} ${e.status}`] as const),
          ...gits.map((e) => [e.at, `git ${e.method} ${e.path} ${e.status}`] as const),
        ].sort((a, b) => a[0] - b[0]);
        process.stderr.write(`wave0 ${wave0}\n`);
        for (const [at, what] of lines) process.stderr.write(`+${at - wave0} ${what}\n`);
      }
      lag.disable();
      const spent = Date.now() - wave0;
      const pushes = pushesIn(wave0, Date.now());
      const bench = process.cpuUsage(cpu0.bench);
      return {
        p50: round(percentile(waits, 50), 0),
        p99: round(percentile(waits, 99), 0),
        max: waits.length ? Math.round(Math.max(...waits)) : Number.NaN,
        n: waits.length,
        // Whose CPU the wave took, as a share of one core over its time: the app's, and the emulator's
        // (this process: the offline GitHub, its git backends excluded).
        appCpuPct: round((100 * (cpuOf(child.pid!) - cpu0.app)) / spent, 0),
        emulatorCpuPct: round((100 * (bench.user + bench.system)) / 1000 / spent, 0),
        statePushP50Ms: round(percentile(pushes, 50), 0),
        emulatorLoopLagMs: {
          mean: round(lag.mean / 1e6, 0),
          p99: round(lag.percentile(99) / 1e6, 0),
          max: round(lag.max / 1e6, 0),
        },
        emulatorRssMB: round(process.memoryUsage().rss / 2 ** 20, 0),
      };
    };
    const labelWaitQuietMs = await labelWave("One more", false);
    const labelWaitMs = await labelWave("And one more", true);
    const after = await memory();
    return {
      ...o,
      repositories: repos.length,
      queuedTasks: queued,
      nodeFlags,
      rssMB: {
        started: started.rssMB,
        loaded: loaded.rssMB,
        afterSweeps: after.rssMB,
        max: Math.max(...rssSeen),
      },
      heapUsedMB: after.heapUsedMB,
      heapTotalMB: after.heapTotalMB,
      externalMB: after.externalMB,
      arrayBuffersMB: after.arrayBuffersMB,
      residentMB: after.residentMB,
      heapSpacesLoadedMB: loaded.heapSpacesMB,
      sweep: { first, unchanged },
      labelWaitQuietMs,
      labelWaitMs,
      queueingMs,
      peakInFlightPerInstallation: Math.max(
        0,
        ...Object.entries(gh.peakConcurrentRequests())
          .filter(([who]) => who.startsWith("installation:"))
          .map(([, n]) => n),
      ),
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
    if (!process.env.BENCH_KEEP) await rm(scratch, { recursive: true, force: true }).catch(() => {});
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
