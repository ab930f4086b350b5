// Every process on the machine read from /proc at a fixed pace: parent, command, start time (epoch ms,
// 10 ms resolution), CPU time and RSS. Benchmarks use it to find a worker's agents (and when each
// started) and to follow the worker's own memory while they run. /proc is Linux's; elsewhere the
// sampler sees nothing.
import { readdirSync, readFileSync } from "node:fs";

export interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  /** The command line, NUL-separated parts joined with spaces, cut to 300 characters. */
  cmd: string;
  /** When the process started (epoch ms, from its start time in clock ticks since boot). */
  startMs: number;
  /** User + system CPU time at the last sample, ms. */
  cpuMs: number;
  rssMB: number;
  /**
   * For the processes `detail` picks: their own memory (private pages) and their proportional share of
   * what they share (PSS), from smaps_rollup. RSS counts a node binary's pages shared with every other
   * node process (~37 MB) in full, once per process.
   */
  privateMB?: number;
  pssMB?: number;
  lastSeen: number;
}

const TICK_MS = 10; // CLK_TCK is 100 on Linux
const PAGE_MB = 4096 / 2 ** 20;

const uptimeMs = (): number => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]) * 1000;

function readStat(pid: string) {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const close = text.lastIndexOf(")");
  const comm = text.slice(text.indexOf("(") + 1, close);
  const f = text.slice(close + 2).split(" ");
  // f[0] is field 3 (state): field n is f[n - 3]
  return {
    comm,
    ppid: Number(f[1]),
    cpuTicks: Number(f[11]) + Number(f[12]),
    startTicks: Number(f[19]),
    rssPages: Number(f[21]),
  };
}

/** Private (clean + dirty) and proportional memory, MB; nothing when the process ended under the read. */
function readRollup(pid: string): { privateMB?: number; pssMB?: number } {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  } catch {
    return {};
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0);
  return {
    privateMB: (kb("Private_Clean") + kb("Private_Dirty")) / 1024,
    pssMB: kb("Pss") / 1024,
  };
}

function readCmd(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim().slice(0, 300);
  } catch {
    return ""; // gone already
  }
}

export interface ProcSampler {
  /** Every process seen, by pid (a pid reused later replaces the entry). */
  procs: Map<number, Proc>;
  /** Ancestors of `pid` as last seen, nearest first. */
  ancestors(pid: number): Proc[];
  stop(): void;
}

/** Samples /proc every `intervalMs`, calling `onSample` with the live processes after each pass. */
export function startProcSampler(opts: {
  intervalMs: number;
  onSample?: (now: number, live: Proc[]) => void;
  /** Processes whose private memory and PSS are read too (a read of smaps_rollup each: pick few). */
  detail?: (p: Proc) => boolean;
}): ProcSampler {
  const bootMs = Date.now() - uptimeMs();
  const procs = new Map<number, Proc>();
  const sample = () => {
    const now = Date.now();
    const live: Proc[] = [];
    let names: string[];
    try {
      names = readdirSync("/proc").filter((n) => /^\d+$/.test(n));
    } catch {
      return;
    }
    for (const name of names) {
      try {
        const s = readStat(name);
        const pid = Number(name);
        const startMs = bootMs + s.startTicks * TICK_MS;
        let p = procs.get(pid);
        if (!p || p.startMs !== startMs) {
          p = {
            pid,
            ppid: s.ppid,
            comm: s.comm,
            cmd: readCmd(name),
            startMs,
            cpuMs: 0,
            rssMB: 0,
            lastSeen: now,
          };
          procs.set(pid, p);
        } else if (p.comm !== s.comm) {
          // The same process runs another program now (exec): its command line changed too.
          p.cmd = readCmd(name);
        }
        // The parent stays the one it was started by: a process whose parent ended is re-parented to init.
        if (s.ppid > 1) p.ppid = s.ppid;
        p.comm = s.comm;
        p.cpuMs = s.cpuTicks * TICK_MS;
        p.rssMB = s.rssPages * PAGE_MB;
        if (opts.detail?.(p)) Object.assign(p, readRollup(name));
        p.lastSeen = now;
        live.push(p);
      } catch {
        // the process ended between the listing and the read
      }
    }
    opts.onSample?.(now, live);
  };
  sample();
  const timer = setInterval(sample, opts.intervalMs);
  return {
    procs,
    ancestors(pid) {
      const out: Proc[] = [];
      let p = procs.get(pid);
      while (p && p.ppid > 1 && out.length < 64) {
        p = procs.get(p.ppid);
        if (p) out.push(p);
      }
      return out;
    },
    stop: () => clearInterval(timer),
  };
}

/** A process's memory from /proc/<pid>/status (MB): resident now, at its peak (VmHWM), and the anonymous part. */
export function procMemory(pid: number | "self"): { rssMB: number; peakRssMB: number; anonMB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kB = (key: string) => {
    const m = status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"));
    if (!m) throw new Error(`no ${key} in /proc/${pid}/status`);
    return Number(m[1]);
  };
  const mb = (n: number) => +(n / 1024).toFixed(1);
  return { rssMB: mb(kB("VmRSS")), peakRssMB: mb(kB("VmHWM")), anonMB: mb(kB("RssAnon")) };
}
