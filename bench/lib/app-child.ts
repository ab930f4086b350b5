// The child of bench/scale-app.ts: the real Fleet app in a process of its own, run as `npm start` runs it
// (built with scripts/build-app.mjs, plain node), so its memory is the app's alone. No reconcile timer:
// the parent asks for a sweep on stdin ("reconcile"), and for the process's memory ("memory"); each
// answer is one JSON line on stdout.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { getHeapSpaceStatistics } from "node:v8";
import { startFleetServer } from "../../src/app/server.ts";
import { procMemory } from "./proc-tree.ts";

process.setSourceMapsEnabled(true);
// MALLOC_ARENA_MAX (BENCH_APP_MALLOC_ARENA_MAX in the parent) is for this process: glibc read it at its
// start, and the app's git processes are not to inherit it.
delete process.env.MALLOC_ARENA_MAX;
// BENCH_DEBUG: every request the app sends, when it started and how long the answer took (stderr).
if (process.env.BENCH_DEBUG) {
  const { subscribe } = await import("node:diagnostics_channel");
  const started = new WeakMap<object, number>();
  subscribe("undici:request:create", (m) => started.set((m as { request: object }).request, Date.now()));
  subscribe("undici:request:headers", (m) => {
    const { request, response } = m as {
      request: { method: string; path: string };
      response: { statusCode: number };
    };
    const t = started.get(request);
    if (t !== undefined)
      process.stderr.write(
        `app-req ${t} ${Date.now() - t} ${request.method} ${request.path} ${response.statusCode}\n`,
      );
  });
}
const options = JSON.parse(process.argv[2] ?? "{}") as {
  appId: number;
  privateKey: string;
  webhookSecret: string;
  baseUrl: string;
};
const app = await startFleetServer({ ...options, resilient: false, logLevel: "fatal", reconcileMs: 0 });
// BENCH_HEAP_SNAPSHOT_AFTER_MS=n (with BENCH_HEAP_SNAPSHOT=dir): one snapshot n ms after the start, mid-burst.
if (process.env.BENCH_HEAP_SNAPSHOT && process.env.BENCH_HEAP_SNAPSHOT_AFTER_MS) {
  const { writeHeapSnapshot } = await import("node:v8");
  setTimeout(
    () => writeHeapSnapshot(`${process.env.BENCH_HEAP_SNAPSHOT}/app-mid-${Date.now()}.heapsnapshot`),
    Number(process.env.BENCH_HEAP_SNAPSHOT_AFTER_MS),
  ).unref();
}
// BENCH_MEMORY_TRACE=ms: the memory and the deliveries in hand every ms on stderr, to see when the peak comes.
if (process.env.BENCH_MEMORY_TRACE) {
  const t0 = Date.now();
  setInterval(() => {
    const m = process.memoryUsage();
    const mb = (n: number) => (n / 2 ** 20).toFixed(1);
    const spaces = getHeapSpaceStatistics()
      .map((h) => `${h.space_name.replace("_space", "")}=${mb(h.physical_space_size)}`)
      .join(" ");
    process.stderr.write(
      `mem ${Date.now() - t0} rss=${mb(m.rss)} used=${mb(m.heapUsed)} total=${mb(m.heapTotal)} ext=${mb(m.external)} inFlight=${app.inFlight} ${spaces}\n`,
    );
  }, Number(process.env.BENCH_MEMORY_TRACE)).unref();
}
const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
say({ ready: app.webhookUrl });
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "reconcile") {
    const t0 = performance.now();
    await app.reconcile();
    say({ reconciled: Math.round(performance.now() - t0) });
  } else if (line === "memory") {
    // BENCH_HEAP_SNAPSHOT=dir: a V8 heap snapshot beside each memory reading, to see what holds the heap.
    if (process.env.BENCH_HEAP_SNAPSHOT) {
      const { writeHeapSnapshot } = await import("node:v8");
      writeHeapSnapshot(`${process.env.BENCH_HEAP_SNAPSHOT}/app-${Date.now()}.heapsnapshot`);
    }
    const m = process.memoryUsage();
    const mb = (n: number) => +(n / 2 ** 20).toFixed(1);
    const maps = residentByMapping();
    // Where the RSS goes: V8's heap (used, and reserved), memory outside it that V8 knows of (Buffers).
    say({
      rssMB: mb(m.rss),
      // The most resident memory the process has had (VmHWM): a burst's peak falls between readings.
      peakRssMB: procMemory("self").peakRssMB,
      heapUsedMB: mb(m.heapUsed),
      heapTotalMB: mb(m.heapTotal),
      externalMB: mb(m.external),
      arrayBuffersMB: mb(m.arrayBuffers),
      // The RSS by kind of mapping (/proc/self/smaps): malloc's main arena, anonymous memory (V8's heap
      // pages, other threads' malloc arenas, large allocations), and files (node's binary, libraries).
      residentMB: { brkHeap: mb(maps.brk), anonymous: mb(maps.anonymous), files: mb(maps.files) },
      // V8's spaces as committed now: the young generation grows to its maximum in a burst and stays.
      heapSpacesMB: Object.fromEntries(
        getHeapSpaceStatistics().map((h) => [h.space_name, mb(h.physical_space_size)]),
      ),
    });
  } else if (line === "idle") {
    await app.idle();
    say({ idle: true });
  }
}
await app.stop();

/** Resident bytes of this process by kind of mapping, from /proc/self/smaps (Linux). */
function residentByMapping(): { brk: number; anonymous: number; files: number } {
  const out = { brk: 0, anonymous: 0, files: 0 };
  let kind: keyof typeof out = "anonymous";
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      const name = head[1] ?? "";
      kind = name === "[heap]" ? "brk" : name.startsWith("/") ? "files" : "anonymous";
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[kind] += Number(rss[1]) * 1024;
  }
  return out;
}
