// Reads every commit of the state branch straight from the emulator's bare repository with real git
// (one `git log` plus one `git cat-file --batch`), and reports the most slots ever held at once.
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { ACTIVE_STATES } from "../../src/core/lifecycle.ts";
import type { Task } from "../../src/core/task.ts";

const run = promisify(execFile);

export interface StateHistory {
  commits: number;
  maxRunning: number;
  /** Commits whose slot holders exceeded the cap (must be empty). */
  overCap: string[];
  /** Tasks ever seen, by issue number, with how many distinct task ids each issue had at the end. */
  finalTasks: Task[];
  /**
   * Each claim of a task by a worker, as the state head shows it: the worker, when the task was first
   * seen dispatched and not yet claimed (undefined: dispatched and claimed in one commit, a hand-off)
   * and when claimed, by commit time (git's, whole seconds), or the lease's heartbeat if earlier (a claim by
   * ref, carried into a later commit).
   */
  claims: Array<{ taskId: string; holder: string; waitedFrom?: number; claimedAt: number }>;
}

export async function readStateHistory(
  gitDir: string,
  cap: number,
  branch = "fleet/state",
): Promise<StateHistory> {
  const log = await run("git", ["-C", gitDir, "log", "--format=%H %ct", branch], { maxBuffer: 64 << 20 });
  const lines = log.stdout.split("\n").filter(Boolean);
  const shas = lines.map((l) => l.split(" ")[0]!);
  const times = lines.map((l) => Number(l.split(" ")[1]) * 1000);
  const seen: Array<{ t: number; tasks: Task[] }> = [];
  const input = shas.map((s) => `${s}:.fleet/state.json\n`).join("");
  const buf = await catFileBatch(gitDir, input);
  let pos = 0;
  let maxRunning = 0;
  const overCap: string[] = [];
  let finalTasks: Task[] = [];
  for (let i = 0; i < shas.length; i++) {
    const nl = buf.indexOf(10, pos);
    const header = buf.subarray(pos, nl).toString();
    pos = nl + 1;
    if (header.endsWith("missing")) continue;
    const size = Number(header.split(" ")[2]);
    const text = buf.subarray(pos, pos + size).toString("utf8");
    pos += size + 1;
    const tasks = Object.values((JSON.parse(text) as { tasks: Record<string, Task> }).tasks ?? {});
    const active = tasks.filter((t) => ACTIVE_STATES.has(t.state)).length;
    maxRunning = Math.max(maxRunning, active);
    if (active > cap) overCap.push(shas[i]!);
    if (i === 0) finalTasks = tasks;
    seen.push({ t: times[i]!, tasks });
  }
  // Oldest first: a task's wait starts at the first commit showing it dispatched and unclaimed, and
  // ends at the first commit showing a worker's lease on it (an attempt each: a retry is another claim).
  const claims: StateHistory["claims"] = [];
  const waiting = new Map<string, number>();
  const holderOf = new Map<string, string>();
  for (const { t, tasks } of seen.reverse()) {
    for (const task of tasks) {
      const holder = task.lease?.holder;
      const key = `${task.id}#${task.attempts}`;
      if (task.state === "dispatched" && holder?.startsWith("dispatch:")) {
        if (!waiting.has(key)) waiting.set(key, t);
      } else if (holder && !holder.startsWith("dispatch:") && !holderOf.has(key)) {
        holderOf.set(key, holder);
        // A claim by ref (core/claims.ts) shows in a later commit: its lease's heartbeat is the claim's time.
        const at = Date.parse(task.lease?.heartbeatAt ?? "");
        claims.push({
          taskId: task.id,
          holder,
          waitedFrom: waiting.get(key),
          claimedAt: Math.min(t, at || t),
        });
      }
    }
  }
  return { commits: shas.length, maxRunning, overCap, finalTasks, claims };
}

export const percentile = (xs: number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

function catFileBatch(gitDir: string, input: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", ["-C", gitDir, "cat-file", "--batch"], { stdio: ["pipe", "pipe", "inherit"] });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => chunks.push(c));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(Buffer.concat(chunks)) : reject(new Error(`git cat-file exited ${code}`)),
    );
    child.stdin.end(input);
  });
}
