// App memory with 10,000 queued tasks: a child process loads a 10k-task state document (and its beads
// mirror) as the app does (the state store over its default transport, git), runs a scheduling pass,
// and reports its RSS; a second child does the same and reads an empty state, as the baseline. The
// child runs as the app runs under `npm start`: built JavaScript (scripts/build-app.mjs, esbuild) on
// plain node, no TypeScript loader. It imports only what it uses (bench/lib/memory-child.ts): the
// offline GitHub stays in the parent, as GitHub is not in the app's process.
// The worker: `fleet run` on a local queue with nothing to do, its RSS once it has settled, run as
// installed (bin/fleet.js: built, plain node) and through tsx's loader (bin/fleet.js's fallback), in
// alternate rounds; the medians are reported (runWorkerIdleMemory).
// Run alone: npx tsx bench/memory.ts [--worker (the worker alone)]; the figures replace `memory` (or
// `memory.workerIdle`) in bench/results/latest.json, as `npm run bench` writes them.
import { execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { buildApp } from "../scripts/build-app.mjs";
import { nodeFlagsFor } from "../scripts/node-flags.mjs";
import { emptyStateDoc, serializeStateDoc } from "../src/core/state-doc.ts";
import { newTask } from "../src/core/task.ts";
import { syncBeads } from "../src/queue/beads-sync.ts";
import { procMemory } from "./lib/proc-tree.ts";

const run = promisify(execFile);
const CHILD = join(import.meta.dirname, "lib/memory-child.ts");
// Inside the repository, so the child's packages resolve from node_modules (they stay external).
const BUILT = join(import.meta.dirname, "results/tmp/memory-child.mjs");
const FLEET_BIN = join(import.meta.dirname, "../bin/fleet.js");
const THROUGH_TSX = join(import.meta.dirname, "lib/cli-through-tsx.mjs");
const LATEST = join(import.meta.dirname, "results/latest.json");

/** The app's figures (10k queued tasks) and the idle worker's, built vs through tsx. */
export async function runMemory(n = 10_000) {
  return { ...(await runAppMemory(n)), workerIdle: await runWorkerIdleMemory() };
}

async function runAppMemory(n: number) {
  await mkdir(join(import.meta.dirname, "results/tmp"), { recursive: true });
  await buildApp({ entry: CHILD, outfile: BUILT });
  const gh = await startGitHubEmulator({ appSlug: "fleet", appName: "Fleet" });
  try {
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("octo") });
    const doc = emptyStateDoc();
    const now = "2026-01-01T00:00:00.000Z";
    for (let i = 1; i <= n; i++) {
      const t = newTask({
        id: `fl-${i.toString(36)}`,
        repo: "octo/full",
        issue: i,
        title: `Task ${i}: do something useful`,
        coder: "claude",
        model: "default",
        priority: 2,
        dependsOn: i > 1 && i % 3 === 0 ? [i - 1] : [],
        requestedBy: "mona",
        now,
      });
      doc.tasks[t.id] = t;
    }
    const beads = syncBeads("", Object.values(doc.tasks), Object.values(doc.tasks));
    for (const [name, files] of [
      ["full", { ".fleet/state.json": serializeStateDoc(doc), ".beads/issues.jsonl": beads }],
      ["empty", { ".fleet/state.json": serializeStateDoc(emptyStateDoc()), ".beads/issues.jsonl": "" }],
    ] as const) {
      await gh.createRepo({ owner: "octo", name, files: { "README.md": "x\n" } });
      // The state branch is written the way Fleet writes it: one commit holding both files.
      const head = await mona.rest.git.getRef({ owner: "octo", repo: name, ref: "heads/main" });
      const tree = await mona.rest.git.createTree({
        owner: "octo",
        repo: name,
        tree: Object.entries(files).map(([path, content]) => ({
          path,
          mode: "100644" as const,
          type: "blob" as const,
          content,
        })),
      });
      const commit = await mona.rest.git.createCommit({
        owner: "octo",
        repo: name,
        message: "seed",
        tree: tree.data.sha,
        parents: [],
      });
      void head;
      await mona.rest.git.createRef({
        owner: "octo",
        repo: name,
        ref: "refs/heads/fleet/state",
        sha: commit.data.sha,
      });
    }
    const measure = async (repo: string) =>
      JSON.parse(
        // With the node flags `fleet serve` (and `npm start`) runs the app with.
        (
          await run(process.execPath, [...nodeFlagsFor("serve"), BUILT, gh.url, gh.userToken("octo"), repo], {
            maxBuffer: 1 << 20,
            // The child collects its garbage before it measures (globalThis.gc), as it always meant to.
            env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --expose-gc`.trim() },
          })
        ).stdout
          .trim()
          .split("\n")
          .at(-1)!,
      );
    const full = await measure("full");
    const empty = await measure("empty");
    return {
      tasks: full.tasks,
      rssMB: full.rssMB,
      heapUsedMB: full.heapUsedMB,
      baselineRssMB: empty.rssMB,
      beadsBytes: full.beadsBytes,
      decisions: full.decisions,
      nodeFlags: nodeFlagsFor("serve"),
    };
  } finally {
    await gh.stop();
  }
}

type ProcMemory = ReturnType<typeof procMemory>;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * `node <entry> run` in a git repository of an empty local queue: its memory `settleMs` after it serves.
 * `flags`: node's flags for the entry that does not go through bin/fleet.js, which gives `fleet run`'s own.
 */
async function idleWorker(entry: string, settleMs: number, flags: string[] = []): Promise<ProcMemory> {
  const home = await mkdtemp(join(tmpdir(), "fleet-bench-worker-"));
  try {
    const repo = join(home, "repo");
    await mkdir(repo);
    const git = (...args: string[]) =>
      run("git", ["-c", "user.name=bench", "-c", "user.email=bench@example.com", ...args], { cwd: repo });
    await git("init", "-q", "-b", "main");
    await writeFile(join(repo, "README.md"), "# bench\n");
    await git("add", "README.md");
    await git("commit", "-q", "-m", "init");
    // The worker's own environment only: no credential or token of the shell running the bench.
    const env: Record<string, string> = { FLEET_HOME: join(home, "queue") };
    for (const key of ["PATH", "HOME", "LANG", "TMPDIR"]) if (process.env[key]) env[key] = process.env[key]!;
    if (process.env.FLEET_RUN_NODE_FLAGS !== undefined)
      env.FLEET_RUN_NODE_FLAGS = process.env.FLEET_RUN_NODE_FLAGS;
    const child = spawn(process.execPath, [...flags, entry, "run"], {
      cwd: repo,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    try {
      const serving = new Promise<void>((done, fail) => {
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk;
          if (/serving /.test(stderr)) done();
        });
        child.once("exit", (code) =>
          fail(new Error(`fleet run exited (${code}) before serving:\n${stderr}`)),
        );
      });
      await Promise.race([
        serving,
        sleep(60_000).then(() =>
          Promise.reject(new Error(`fleet run did not serve within 60 s:\n${stderr}`)),
        ),
      ]);
      await sleep(settleMs);
      return procMemory(child.pid!);
    } finally {
      child.kill("SIGTERM");
      await exited;
    }
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

/**
 * `fleet run`'s RSS idle (an empty local queue, `settleMs` after it serves), built vs through tsx:
 * `rounds` of each, alternating, medians reported.
 */
export async function runWorkerIdleMemory({ settleMs = 5_000, rounds = 3 } = {}) {
  const built: ProcMemory[] = [];
  const tsx: ProcMemory[] = [];
  for (let i = 0; i < rounds; i++) {
    built.push(await idleWorker(FLEET_BIN, settleMs));
    // The same node flags both ways, so the difference is tsx's loader alone.
    tsx.push(await idleWorker(THROUGH_TSX, settleMs, nodeFlagsFor("run")));
  }
  const of = (xs: ProcMemory[], key: keyof ProcMemory) => median(xs.map((x) => x[key]));
  return {
    settleSeconds: settleMs / 1000,
    rounds,
    nodeFlags: nodeFlagsFor("run"),
    builtRssMB: of(built, "rssMB"),
    tsxRssMB: of(tsx, "rssMB"),
    savedMB: +(of(tsx, "rssMB") - of(built, "rssMB")).toFixed(1),
    builtAnonMB: of(built, "anonMB"),
    tsxAnonMB: of(tsx, "anonMB"),
    builtPeakRssMB: of(built, "peakRssMB"),
    tsxPeakRssMB: of(tsx, "peakRssMB"),
    builtRssEachMB: built.map((x) => x.rssMB),
    tsxRssEachMB: tsx.map((x) => x.rssMB),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const workerOnly = process.argv.includes("--worker");
  const latest = await readFile(LATEST, "utf8")
    .then((t) => JSON.parse(t) as Record<string, unknown>)
    .catch(() => ({}) as Record<string, unknown>);
  if (workerOnly) {
    const workerIdle = await runWorkerIdleMemory();
    console.log(JSON.stringify(workerIdle, null, 2));
    latest.memory = { ...(latest.memory as object | undefined), workerIdle };
  } else {
    latest.memory = await runMemory();
    console.log(JSON.stringify(latest.memory, null, 2));
  }
  await writeFile(LATEST, `${JSON.stringify(latest, null, 2)}\n`);
}
