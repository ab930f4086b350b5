// Scheduler throughput: one scheduleNext pass over n tasks (mostly queued, 2 dependency edges per task).
// Run: npx tsx bench/scheduler.ts   Writes bench/results/scheduler.json.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defaultFleetConfig } from "../src/core/config.ts";
import { queuePosition, scheduleNext } from "../src/core/scheduler.ts";
import type { Task, TaskState } from "../src/core/task.ts";

const NOW = "2025-03-01T12:00:00.000Z";
const BASE = Date.parse(NOW);

// Deterministic PRNG so every run measures the same input.
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function makeTasks(n: number): Task[] {
  const rand = rng(n);
  const coders = ["claude", "codex", "agy"];
  const tasks: Task[] = [];
  for (let i = 1; i <= n; i++) {
    const r = rand();
    const state: TaskState = r < 0.1 ? "done" : r < 0.12 ? "blocked" : r < 0.125 ? "rate-limited" : "queued";
    const deps: number[] = [];
    // ~2 edges per task onto earlier issues: 10k tasks -> ~20k edges.
    if (i > 2) for (let k = 0; k < 2; k++) deps.push(1 + Math.floor(rand() * (i - 1)));
    const queuedAt = new Date(BASE - (n - i) * 1000 - Math.floor(rand() * 5000)).toISOString();
    tasks.push({
      id: `fl-${i.toString(36)}`,
      repo: "o/r",
      issue: i,
      title: `task ${i}`,
      coder: coders[i % 3]!,
      model: "m",
      priority: Math.floor(rand() * 5) as Task["priority"],
      state,
      dependsOn: deps,
      createdAt: queuedAt,
      updatedAt: queuedAt,
      queuedAt,
      attempts: 0,
      ...(state === "rate-limited" ? { resetAt: new Date(BASE - 1000).toISOString() } : {}),
    });
  }
  // Make a few tasks dependency-free and active so the pass has slot holders and grants to make.
  for (let i = 0; i < Math.min(n, 50); i++) {
    const t = tasks[i]!;
    t.dependsOn = [];
    if (i < 2) {
      t.state = "running";
      t.lease = {
        holder: "w",
        slot: i + 1,
        acquiredAt: NOW,
        heartbeatAt: NOW,
        expiresAt: "2025-03-01T13:00:00Z",
      };
    }
  }
  return tasks;
}

const config = { ...defaultFleetConfig(), max_concurrent: 10 };
const sizes = [1_000, 10_000, 100_000];
const results: Array<Record<string, number>> = [];

for (const n of sizes) {
  const tasks = makeTasks(n);
  const edges = tasks.reduce((sum, t) => sum + t.dependsOn.length, 0);
  for (let i = 0; i < 5; i++) scheduleNext({ tasks, config, now: NOW }); // warm up the JIT
  const iterations = n >= 100_000 ? 20 : 100;
  const times: number[] = [];
  let decisions = 0;
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    decisions = scheduleNext({ tasks, config, now: NOW }).length;
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)]!;
  const p95 = times[Math.floor(times.length * 0.95)]!;
  const last = tasks.findLast((t) => t.state === "queued")!;
  const qStart = performance.now();
  queuePosition(tasks, last.id, config);
  const queueMs = performance.now() - qStart;
  const row = {
    tasks: n,
    edges,
    decisions,
    ms_per_call_median: +median.toFixed(3),
    ms_per_call_p95: +p95.toFixed(3),
    us_per_decision: +((median * 1000) / Math.max(decisions, 1)).toFixed(3),
    queue_position_ms: +queueMs.toFixed(3),
  };
  results.push(row);
  console.log(
    `${String(n).padStart(7)} tasks, ${String(edges).padStart(6)} edges: ${row.ms_per_call_median} ms/call median (p95 ${row.ms_per_call_p95}), ${decisions} decisions, ${row.us_per_decision} µs/decision; queuePosition ${row.queue_position_ms} ms`,
  );
}

const out = join(dirname(fileURLToPath(import.meta.url)), "results", "scheduler.json");
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  `${JSON.stringify({ node: process.version, date: new Date().toISOString(), max_concurrent: 10, results }, null, 2)}\n`,
);
console.log(`saved ${out}`);
