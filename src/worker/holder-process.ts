import { readFile, readlink } from "node:fs/promises";
import { hostname } from "node:os";
import { canJudgeProcess } from "../core/leases.ts";
import { isActive } from "../core/lifecycle.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { LeaseProcess } from "../core/task.ts";

// A worker killed hard (kill -9, the OOM killer) leaves its leases behind until they expire. The lease
// names its process and machine, so a worker on the same machine can see that process is gone and
// give its tasks back at once. Only Linux's /proc can tell; elsewhere leases simply expire.

let mine: Promise<LeaseProcess | undefined> | undefined;

/** This process as a lease records it; undefined where /proc cannot tell (then no lease names it). */
export function thisProcess(): Promise<LeaseProcess | undefined> {
  mine ??= describeSelf().catch(() => undefined);
  return mine;
}

async function describeSelf(): Promise<LeaseProcess | undefined> {
  const [bootId, pidNs, start] = await Promise.all([
    readFile("/proc/sys/kernel/random/boot_id", "utf8"),
    readlink("/proc/self/ns/pid"),
    startOf(process.pid),
  ]);
  const uid = process.getuid?.();
  if (!start || uid === undefined || !bootId.trim()) return undefined;
  return { host: hostname(), bootId: bootId.trim(), pidNs, uid, pid: process.pid, start: start.ticks };
}

/** A process's start time (clock ticks since boot) and whether it has exited unreaped; undefined when there is no such process. */
async function startOf(pid: number): Promise<{ ticks: string; zombie: boolean } | undefined> {
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  // The command name, in parentheses, may hold spaces and parentheses: the fields follow the last one.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Field 3 (state) is fields[0]; field 22 (starttime) is fields[19].
  const ticks = fields[19];
  if (!ticks) throw new Error(`unreadable /proc/${pid}/stat`);
  return { ticks, zombie: fields[0] === "Z" || fields[0] === "X" };
}

/** Whether the process a lease names is gone: no such process, or another one now has its pid. */
async function processGone(p: LeaseProcess): Promise<boolean> {
  try {
    const now = await startOf(p.pid);
    return now === undefined || now.zombie || now.ticks !== p.start;
  } catch {
    // Cannot tell (permissions): the lease runs out as any other.
    return false;
  }
}

/**
 * The runs in the state whose lease names a process on this machine that is gone: what a worker
 * started after a hard kill gives back to the queue (see reclaimGoneRuns).
 */
export async function goneRunsHere(doc: FleetStateDoc): Promise<Array<{ taskId: string; holder: string }>> {
  const here = await thisProcess();
  if (!here) return [];
  const gone: Array<{ taskId: string; holder: string }> = [];
  for (const task of Object.values(doc.tasks)) {
    const lease = task.lease;
    if (!lease?.process || !isActive(task.state) || !canJudgeProcess(lease, here)) continue;
    if (lease.process.pid === here.pid && lease.process.start === here.start) continue;
    if (await processGone(lease.process)) gone.push({ taskId: task.id, holder: lease.holder });
  }
  return gone;
}
