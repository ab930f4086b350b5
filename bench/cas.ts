// Compare-and-swap benchmark: 4 writer processes race 200 transitions each on one state branch
// (acquire or release a slot under max_concurrent 3, plus a counter increment per transition), then
// 2 local processes x 200 increments on a $FLEET_HOME store. Run: npx tsx bench/cas.ts
// `--transport=git` writes through the git smart-HTTP store instead of the REST API (emulator only;
// results in bench/results/cas-git.json, REST and git requests reported apart).
// `--server=memory`: 4 writers in this process on the in-memory transport (src/state/memory-store.ts),
// each read and each write one request; a few seconds (results in bench/results/cas-memory.json).
// `--transitions=N` for a quicker run (the README figures use the default).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { acquireSlot, releaseLease, slotsInUse } from "../src/core/leases.ts";
import { type FleetStateDoc, parseStateDoc, recordLedger, STATE_PATH } from "../src/core/state-doc.ts";
import { newTask } from "../src/core/task.ts";
import { githubOverOctokit } from "../src/github/octokit-port.ts";
import { StateConflictError } from "../src/state/errors.ts";
import { createGitStateStore } from "../src/state/git-store.ts";
import { createGitHubStateStore } from "../src/state/github-store.ts";
import { createLocalStateStore } from "../src/state/local-store.ts";
import { createMemoryRepo, createMemoryStateStore, type MemoryRepo } from "../src/state/memory-store.ts";

const run = promisify(execFile);
const WRITERS = 4;
const TRANSITIONS = Number(process.argv.find((a) => a.startsWith("--transitions="))?.split("=")[1] ?? 200);
const MAX_CONCURRENT = 3;
const TASKS_PER_WRITER = 2;
const LOCAL_PROCS = 2;
const LOCAL_INCREMENTS = 200;
const NOW = new Date("2026-01-01T01:00:00Z");
const DAY = "2026-01-01";
const here = import.meta.dirname;
const tsx = join(here, "../node_modules/.bin/tsx");

const TRANSPORT = process.argv.includes("--transport=git") ? "git" : "rest";

const taskId = (w: number, k: number) => `fl-w${w}t${k}`;

type BenchStats = {
  requests: number;
  notModified: number;
  byRoute: Record<string, number>;
  gitOps?: unknown;
};
type BenchStore = {
  update: ReturnType<typeof createGitHubStateStore>["update"];
  stats(): BenchStats;
};

/** The REST store, or the git store with a private cache repository; both report their requests the same way. */
async function benchStore(url: string, token: string, transport: string): Promise<BenchStore> {
  if (transport !== "git") {
    return createGitHubStateStore({
      github: githubOverOctokit(new Octokit({ baseUrl: url, auth: token })),
      owner: "octo",
      repo: "widgets",
    });
  }
  const store = createGitStateStore({
    url: `${url}/octo/widgets.git`,
    token: () => token,
    owner: "octo",
    repo: "widgets",
    cacheDir: await mkdtemp(join(tmpdir(), "fleet-bench-git-")),
  });
  return {
    update: store.update,
    stats: () => ({ requests: 0, notModified: 0, byRoute: {}, gitOps: store.stats() }),
  };
}

/** A store on the in-memory repository: each read and each write one request. */
function memoryStore(repo: MemoryRepo): BenchStore {
  const store = createMemoryStateStore({ repo });
  return {
    update: store.update,
    stats: () => {
      const st = store.stats();
      return { requests: st.requests, notModified: 0, byRoute: { read: st.reads, write: st.writes } };
    },
  };
}

interface WriterResult {
  writer: number;
  lateStartMs: number;
  ranMs: number;
  gaveUp: number;
  retries: number;
  granted: number;
  released: number;
  noSlot: number;
  stats: BenchStats;
}

/** Writer `w`'s transitions: two steps taking slots for its two tasks, then two giving them back (8 tasks want 3 slots). */
async function runWriter(store: BenchStore, w: number, n: number, startAt: number): Promise<WriterResult> {
  // Every writer starts at the same moment, whatever its process start-up took.
  await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())));
  const began = Date.now();
  let retries = 0;
  let granted = 0;
  let released = 0;
  let noSlot = 0;
  let gaveUp = 0;
  for (let i = 0; i < n; i++) {
    let outcome = "";
    const attempt = () =>
      store.update(({ doc }) => {
        const id = taskId(w, i % TASKS_PER_WRITER);
        let next: FleetStateDoc = doc;
        let message: string;
        const released = i % 4 >= 2 ? releaseLease(doc, id, { holder: `w${w}`, now: NOW }) : null;
        if (i % 4 >= 2) {
          next = released ?? doc;
          outcome = released ? "released" : "nothing-held";
          message = released ? `release ${id} (w${w})` : `w${w}: ${id} holds no slot`;
        } else {
          const a = acquireSlot(doc, id, { holder: `w${w}`, now: NOW, maxConcurrent: MAX_CONCURRENT });
          if (a.ok) {
            next = a.doc;
            outcome = "granted";
            message = `dispatch ${id} to claude (slot ${a.slot}/${a.of})`;
          } else {
            outcome = "no-slot";
            message = `w${w}: no free slot for ${id}`;
          }
        }
        return { doc: recordLedger(next, { day: DAY, coder: `w${w}` }), message };
      });
    let r: Awaited<ReturnType<typeof attempt>>;
    for (;;) {
      try {
        r = await attempt();
        break;
      } catch (error) {
        // StateConflictError: nothing was written; the caller retries, as its message says.
        if (!(error instanceof StateConflictError)) throw error;
        gaveUp++;
      }
    }
    retries += r.retries;
    if (outcome === "granted") granted++;
    else if (outcome === "released") released++;
    else if (outcome === "no-slot") noSlot++;
  }
  const ranMs = Date.now() - began;
  return {
    writer: w,
    lateStartMs: began - startAt,
    ranMs,
    gaveUp,
    retries,
    granted,
    released,
    noSlot,
    stats: store.stats(),
  };
}

interface BenchServer {
  name: string;
  /** Every writer's result, the writers started together at `startAt`. */
  runWriters(startAt: number): Promise<WriterResult[]>;
  /** A store for seeding the branch. */
  seedStore(): Promise<BenchStore>;
  /** state.json of every commit on the branch, newest first, and the requests the server saw. */
  branchStates(): Promise<string[]>;
  requests(): number;
  /** Git smart-HTTP requests (clone, fetch, push): not REST requests. */
  gitRequests(): number;
  close(): Promise<void>;
}

async function emulatorServer(): Promise<BenchServer> {
  const emulator = await startGitHubEmulator({ appSlug: "fleet", appName: "Fleet" });
  const repo = await emulator.createRepo({
    owner: "octo",
    name: "widgets",
    files: { "README.md": "# widgets\n" },
  });
  emulator.addCollaborator(repo.fullName, "maintainer", "write");
  const token = emulator.userToken("maintainer");
  return {
    name: "offline emulator (@fleet/github-emulator, bare git repository)",
    seedStore: () => benchStore(emulator.url, token, TRANSPORT),
    // One process per writer, as separate app replicas or workers would be.
    async runWriters(startAt) {
      const outs = await Promise.all(
        Array.from({ length: WRITERS }, (_, w) =>
          run(
            tsx,
            [
              join(here, "cas.ts"),
              "writer",
              emulator.url,
              token,
              String(w),
              String(TRANSITIONS),
              String(startAt),
              TRANSPORT,
            ],
            { maxBuffer: 1 << 24 },
          ),
        ),
      );
      return outs.map((o) => JSON.parse(o.stdout) as WriterResult);
    },
    async branchStates() {
      const shas = (
        await execa("git", ["-C", repo.gitDir, "rev-list", "refs/heads/fleet/state"])
      ).stdout.split("\n");
      const input = shas.map((sha) => `${sha}:${STATE_PATH}`).join("\n");
      const out = (
        await execa("git", ["-C", repo.gitDir, "cat-file", "--batch"], { input, stripFinalNewline: false })
      ).stdout;
      const docs: string[] = [];
      let at = 0;
      while (at < out.length) {
        const nl = out.indexOf("\n", at);
        const size = Number(out.slice(at, nl).split(" ")[2]);
        docs.push(out.slice(nl + 1, nl + 1 + size));
        at = nl + 1 + size + 1;
      }
      return docs;
    },
    requests: () => emulator.counts().total,
    gitRequests: () => emulator.gitRequests.counts().total,
    close: () => emulator.stop(),
  };
}

function memoryServer(): BenchServer {
  const repo = createMemoryRepo();
  return {
    name: "in-memory transport (src/state/memory-store.ts)",
    seedStore: async () => memoryStore(repo),
    runWriters: (startAt) =>
      Promise.all(
        Array.from({ length: WRITERS }, (_, w) => runWriter(memoryStore(repo), w, TRANSITIONS, startAt)),
      ),
    async branchStates() {
      const docs: string[] = [];
      for (let sha = repo.refs.get("fleet/state"); sha; sha = repo.commits.get(sha)!.parents[0]) {
        docs.push(repo.commits.get(sha)!.files[STATE_PATH] ?? "");
      }
      return docs;
    },
    // Neither REST nor git: the stores' own counts are the figure.
    requests: () => 0,
    gitRequests: () => 0,
    close: async () => {},
  };
}

async function githubBench(kind: "emulator" | "memory") {
  const server = kind === "emulator" ? await emulatorServer() : memoryServer();
  try {
    const seed = await server.seedStore();
    await seed.update(({ doc }) => {
      const tasks = { ...doc.tasks };
      for (let w = 0; w < WRITERS; w++) {
        for (let k = 0; k < TASKS_PER_WRITER; k++) {
          const t = newTask({
            id: taskId(w, k),
            repo: "octo/widgets",
            issue: w * 10 + k + 1,
            title: "bench",
            coder: "claude",
            model: "opus",
            now: NOW.toISOString(),
          });
          tasks[t.id] = t;
        }
      }
      return {
        doc: { ...doc, config: { max_concurrent: MAX_CONCURRENT }, tasks },
        message: "bench: seed tasks",
      };
    });
    const seedCommits = (await server.branchStates()).length;
    const requestsBefore = server.requests();
    const gitRequestsBefore = server.gitRequests();
    // Writer processes need a few seconds to start; in-process writers start at once.
    const startAt = Date.now() + (kind === "emulator" ? 8_000 : 0);
    const results = await server.runWriters(startAt);
    const elapsedMs =
      Math.max(...results.map((r) => r.lateStartMs + r.ranMs)) -
      Math.min(...results.map((r) => r.lateStartMs));
    const serverRequests = server.requests() - requestsBefore;
    const serverGitRequests = server.gitRequests() - gitRequestsBefore;
    // Check every state the branch ever held for over-granted slots.
    let overGranted = 0;
    let maxLive = 0;
    const states = await server.branchStates();
    const final = parseStateDoc(states[0]!, "bench", "bench");
    for (const text of states) {
      const doc = parseStateDoc(text, "bench", "bench");
      const live = slotsInUse(doc, NOW).size;
      const leases = Object.values(doc.tasks).filter((t) => t.lease).length;
      maxLive = Math.max(maxLive, leases);
      if (live > MAX_CONCURRENT || leases > MAX_CONCURRENT) overGranted++;
    }
    const statesChecked = states.length;
    const perWriter = results.map((r) => ({
      writer: r.writer,
      expected: TRANSITIONS,
      counted: final.ledger[DAY]?.[`w${r.writer}`]?.runs ?? 0,
      lateStartMs: r.lateStartMs,
      ranMs: r.ranMs,
      gaveUp: r.gaveUp,
      retries: r.retries,
      granted: r.granted,
      released: r.released,
      noSlot: r.noSlot,
      requests: r.stats.requests,
      notModified: r.stats.notModified,
      byRoute: r.stats.byRoute,
      ...(r.stats.gitOps ? { gitOps: r.stats.gitOps } : {}),
    }));
    const total = WRITERS * TRANSITIONS;
    const clientRequests = perWriter.reduce((s, r) => s + r.requests, 0);
    const notModified = perWriter.reduce((s, r) => s + r.notModified, 0);
    const retries = perWriter.reduce((s, r) => s + r.retries, 0);
    const gaveUp = perWriter.reduce((s, r) => s + r.gaveUp, 0);
    return {
      server: server.name,
      transport: kind === "memory" ? "memory" : TRANSPORT,
      writers: WRITERS,
      transitionsPerWriter: TRANSITIONS,
      maxConcurrent: MAX_CONCURRENT,
      transitions: total,
      lostUpdates: total - perWriter.reduce((s, r) => s + r.counted, 0),
      slotsOverGranted: overGranted,
      maxLeasesSeen: maxLive,
      statesChecked,
      commits: states.length - seedCommits,
      casRetries: retries,
      updatesThatGaveUp: gaveUp,
      retriesPerTransition: +(retries / total).toFixed(3),
      requests: clientRequests,
      serverRequests,
      requestsPerTransition: +(clientRequests / total).toFixed(3),
      restRequestsPerTransition: +(serverRequests / total).toFixed(3),
      gitRequests: serverGitRequests,
      gitRequestsPerTransition: +(serverGitRequests / total).toFixed(3),
      notModified304: notModified,
      rateLimitedRequestsPerTransition: +((clientRequests - notModified) / total).toFixed(3),
      elapsedMs: Math.round(elapsedMs),
      perWriter,
    };
  } finally {
    await server.close();
  }
}

async function localBench() {
  const home = await mkdtemp(join(tmpdir(), "fleet-bench-"));
  try {
    const script = join(here, "../test/state/fixtures/local-increment.ts");
    const started = performance.now();
    await Promise.all(
      Array.from({ length: LOCAL_PROCS }, (_, p) =>
        run(tsx, [script, home, String(LOCAL_INCREMENTS), `p${p}`]),
      ),
    );
    const elapsedMs = performance.now() - started;
    const { doc } = await createLocalStateStore({ home }).read();
    const counted = doc.ledger["2026-01-01"]?.bench?.runs ?? 0;
    return {
      processes: LOCAL_PROCS,
      incrementsPerProcess: LOCAL_INCREMENTS,
      counted,
      lostUpdates: LOCAL_PROCS * LOCAL_INCREMENTS - counted,
      elapsedMs: Math.round(elapsedMs),
    };
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

if (process.argv[2] === "writer") {
  const [url, token, w, n, startAt, transport] = process.argv.slice(3);
  const store = await benchStore(url!, token!, transport ?? "rest");
  process.stdout.write(JSON.stringify(await runWriter(store, Number(w), Number(n), Number(startAt))));
} else {
  const kind = process.argv.includes("--server=memory") ? "memory" : "emulator";
  if (TRANSPORT === "git" && kind === "memory")
    throw new Error("--transport=git needs the emulator (--server=memory runs the in-memory transport)");
  const github = await githubBench(kind);
  // The local store does not depend on the transport: measured with the REST run only.
  const local = TRANSPORT === "git" ? undefined : await localBench();
  const out = { date: new Date().toISOString(), node: process.version, github, local };
  console.log(JSON.stringify(out, null, 2));
  await mkdir(join(here, "results"), { recursive: true });
  const file = TRANSPORT === "git" ? "cas-git.json" : kind === "emulator" ? "cas.json" : "cas-memory.json";
  await writeFile(join(here, "results", file), `${JSON.stringify(out, null, 2)}\n`);
}
