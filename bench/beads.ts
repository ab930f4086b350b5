/**
 * Beads mirror benchmark: parse and one-record rewrite of `.beads/issues.jsonl` at 1k, 10k and 100k
 * records (plus readiness over the parsed set). Run: npx tsx bench/beads.ts
 * Prints a table and saves bench/results/beads.json. Target: 10k parse + rewrite under 200 ms.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import {
  type BeadIssue,
  liveIssues,
  parseJsonl,
  readyIssues,
  rewriteJsonl,
  serializeIssue,
} from "../src/beads/index.ts";

const SIZES = [1_000, 10_000, 100_000];
const RUNS = 7;

/** A realistic file: sorted ids, a third with blocks deps, some parent-child, Fleet metadata, mixed statuses. */
function generate(n: number): string {
  const width = String(n).length;
  const ids = Array.from({ length: n }, (_, i) => `fl-${i.toString(36).padStart(width, "0")}`).sort();
  const statuses = ["open", "closed", "in_progress", "closed", "open"];
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = ids[i]!;
    const created = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
    const issue: BeadIssue = {
      id,
      title: `Task ${i}: do the thing <${i}>`,
      description: `Description of task ${i}.\nSecond line with "quotes" & more.`,
      status: statuses[i % statuses.length],
      priority: i % 5,
      issue_type: "task",
      created_at: created,
      created_by: "fleet",
      updated_at: created,
      external_ref: `gh-${i + 1}`,
      metadata: {
        fleet: {
          repo: "acme/app",
          issue: i + 1,
          coder: "claude",
          model: "opus",
          state: "queued",
          attempts: 0,
        },
      },
    };
    if (issue.status === "closed") issue.closed_at = created;
    if (i % 3 === 1 && i > 0) {
      issue.dependencies = [
        { issue_id: id, depends_on_id: ids[i - 1]!, type: "blocks", created_at: created },
      ];
    }
    if (i % 7 === 2 && i > 10) {
      issue.dependencies = [
        ...(issue.dependencies ?? []),
        { issue_id: id, depends_on_id: ids[i - 10]!, type: "parent-child", created_at: created },
      ];
    }
    lines.push(serializeIssue(issue));
  }
  return `${lines.join("\n")}\n`;
}

function timeMs(fn: () => void): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

interface Row {
  records: number;
  bytes: number;
  parseMs: number;
  rewriteOneMs: number;
  parsePlusRewriteMs: number;
  readyMs: number;
  bareJsonParseMs: number;
}

const rows: Row[] = [];
for (const n of SIZES) {
  const text = generate(n);
  const parsed = parseJsonl(text);
  const target = structuredClone(parsed.records[Math.floor(n / 2)]!.issue);
  target.status = "in_progress";
  target.updated_at = "2026-06-01T00:00:00Z";
  // Warm up the JIT on this size once.
  rewriteJsonl(text, { upsert: [target] });
  const parseTimes: number[] = [];
  const rewriteTimes: number[] = [];
  const readyTimes: number[] = [];
  const baselineTimes: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    let issues: BeadIssue[] = [];
    parseTimes.push(
      timeMs(() => {
        issues = liveIssues(parseJsonl(text));
      }),
    );
    let out = "";
    rewriteTimes.push(
      timeMs(() => {
        out = rewriteJsonl(text, { upsert: [target] });
      }),
    );
    if (out.length === text.length) throw new Error("rewrite did not change the record");
    readyTimes.push(timeMs(() => readyIssues(issues)));
    // The floor: split + bare JSON.parse of every line, keeping the values (as a parse must; what
    // is kept has to survive garbage collection, which dominates at 100k).
    baselineTimes.push(
      timeMs(() => {
        const kept: unknown[] = [];
        for (const line of text.split("\n")) if (line) kept.push(JSON.parse(line));
        if (kept.length !== n) throw new Error("baseline lost lines");
      }),
    );
  }
  const row: Row = {
    records: n,
    bytes: text.length,
    parseMs: round(median(parseTimes)),
    rewriteOneMs: round(median(rewriteTimes)),
    parsePlusRewriteMs: round(median(parseTimes) + median(rewriteTimes)),
    readyMs: round(median(readyTimes)),
    bareJsonParseMs: round(median(baselineTimes)),
  };
  rows.push(row);
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

console.log("records   bytes        parse ms  rewrite(1) ms  parse+rewrite ms  ready ms  bare JSON.parse ms");
for (const r of rows) {
  console.log(
    `${String(r.records).padEnd(9)} ${String(r.bytes).padEnd(12)} ${String(r.parseMs).padEnd(9)} ${String(r.rewriteOneMs).padEnd(14)} ${String(r.parsePlusRewriteMs).padEnd(17)} ${String(r.readyMs).padEnd(9)} ${r.bareJsonParseMs}`,
  );
}
const tenK = rows.find((r) => r.records === 10_000)!;
console.log(`10k parse+rewrite: ${tenK.parsePlusRewriteMs} ms (target < 200 ms)`);

const result = {
  benchmark: "beads",
  date: new Date().toISOString(),
  node: process.version,
  cpu: cpus()[0]?.model ?? "unknown",
  cores: cpus().length,
  // The machine is shared; a high load average inflates every figure.
  loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
  runs: RUNS,
  statistic: "median",
  targetMs10k: 200,
  rows,
};
const dir = fileURLToPath(new URL("./results/", import.meta.url));
mkdirSync(dir, { recursive: true });
writeFileSync(`${dir}beads.json`, `${JSON.stringify(result, null, 2)}\n`);
console.log(`saved ${dir}beads.json`);
