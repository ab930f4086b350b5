import { type ChildProcess, spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import type { AgentCommand } from "../../agents/types.ts";

/**
 * Why the run ended. "rate-limited": the agent exited unsuccessfully after reporting a rate or usage
 * limit (wait for `rateLimit.resetsAt`, then retry); "failed": any other unsuccessful exit.
 */
export type RunAgentReason =
  | "completed"
  | "timeout"
  | "stall"
  | "cancelled"
  | "failed"
  | "rate-limited"
  | "limit"
  | "spawn-error";

/**
 * Splits a byte stream into lines: partial chunks, CRLF, multi-byte characters across chunks, huge lines.
 * Linear in the output: each chunk is searched once, and a line's pieces are joined once (a hostile
 * process printing megabytes without a line break would otherwise hold the worker's event loop).
 */
export class LineSplitter {
  private decoder = new StringDecoder("utf8");
  /** The current line so far, in pieces without a line break, and its length. */
  private pieces: string[] = [];
  private pending = 0;
  private readonly onLine: (line: string) => void;
  private readonly maxLineLength: number;
  constructor(
    onLine: (line: string) => void,
    /** A line longer than this is passed on in pieces, so one runaway line cannot exhaust memory. */
    maxLineLength = 32 * 1024 * 1024,
  ) {
    this.onLine = onLine;
    this.maxLineLength = maxLineLength;
  }

  push(chunk: Buffer | string): void {
    const text = typeof chunk === "string" ? chunk : this.decoder.write(chunk);
    let start = 0;
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", start)) {
      this.pieces.push(text.slice(start, nl));
      this.emit(this.take());
      start = nl + 1;
    }
    if (start < text.length) {
      this.pieces.push(start === 0 ? text : text.slice(start));
      this.pending += text.length - start;
    }
    if (this.pending > this.maxLineLength) {
      let rest = this.take();
      while (rest.length > this.maxLineLength) {
        this.onLine(rest.slice(0, this.maxLineLength));
        rest = rest.slice(this.maxLineLength);
      }
      if (rest) {
        this.pieces.push(rest);
        this.pending = rest.length;
      }
    }
  }

  end(): void {
    const tail = this.decoder.end();
    if (tail) {
      this.pieces.push(tail);
      this.pending += tail.length;
    }
    if (this.pending > 0) this.emit(this.take());
  }

  /** The current line's pieces as one string; the line starts anew. */
  private take(): string {
    const line = this.pieces.length === 1 ? this.pieces[0]! : this.pieces.join("");
    this.pieces = [];
    this.pending = 0;
    return line;
  }

  private emit(line: string) {
    this.onLine(line.endsWith("\r") ? line.slice(0, -1) : line);
  }
}

/** How often a run's cgroup is read for a limit reached (a fork bomb is stopped within this). */
const LIMIT_POLL_MS = 500;

/**
 * How long an agent that reported its end (its final result event) has to exit before it is stopped:
 * agent CLIs have been seen to hang after their answer in headless mode, and its run is what it reported.
 */
export const EXIT_GRACE_MS = 10_000;

/**
 * How the agent's process ended: by itself (`exited`), stopped by Fleet (why; `reported`: it did not
 * exit within EXIT_GRACE_MS of reporting its end), or never started.
 */
export interface ProcessEnd {
  reason: RunAgentReason | "exited" | "reported";
  code: number | null;
  signal: NodeJS.Signals | null;
  spawnError?: string;
}

/**
 * Starts the agent in a process group of its own and watches it: every output line handed on, the
 * stall timer reset by any output, the wall-clock timer, a cancel; stopping sends SIGTERM to the whole
 * group, then SIGKILL after the grace time. Whatever the agent left running in its group is killed
 * when it exits. (In a sandbox the group holds bwrap, whose PID namespace dies with it.)
 */
export function superviseProcess(o: {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  stdin: AgentCommand["stdin"];
  timeoutMs: number;
  stallMs: number;
  killGraceMs?: number;
  signal?: AbortSignal;
  onLine: (line: string, stream: "stdout" | "stderr") => void;
  onSpawn: (pid: number | undefined) => void;
  /** Polled while the process runs: true stops it with reason "limit" (a resource limit reached). */
  overLimit?: () => Promise<boolean>;
  /** Whether the agent has reported its end (read after each output): from then it has exitGraceMs to exit. */
  reported?: () => boolean;
  exitGraceMs?: number;
}): Promise<ProcessEnd> {
  let child: ChildProcess;
  try {
    child = spawn(o.file, o.args, {
      cwd: o.cwd,
      env: o.env,
      detached: true,
      stdio: [o.stdin === "ignore" ? "ignore" : "pipe", "pipe", "pipe"],
    });
  } catch (err) {
    return Promise.resolve({ reason: "spawn-error", code: null, signal: null, spawnError: String(err) });
  }
  o.onSpawn(child.pid);
  return new Promise<ProcessEnd>((resolve) => {
    let stopReason: ProcessEnd["reason"] | undefined;
    let spawnError: string | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const stdout = new LineSplitter((l) => o.onLine(l, "stdout"));
    const stderr = new LineSplitter((l) => o.onLine(l, "stderr"));
    const stop = (reason: ProcessEnd["reason"]) => {
      if (stopReason) return;
      stopReason = reason;
      signalGroup(child, "SIGTERM");
      killTimer = setTimeout(() => signalGroup(child, "SIGKILL"), o.killGraceMs ?? 3000);
    };
    let stallTimer = setTimeout(() => stop("stall"), o.stallMs);
    // After each output (its lines handed on first): quiet for stallMs is a stall, unless the agent has
    // reported its end, when it has the exit grace.
    const activity = () => {
      clearTimeout(stallTimer);
      if (stopReason) return;
      stallTimer = o.reported?.()
        ? setTimeout(() => stop("reported"), o.exitGraceMs ?? EXIT_GRACE_MS)
        : setTimeout(() => stop("stall"), o.stallMs);
    };
    const wallTimer = setTimeout(() => stop("timeout"), o.timeoutMs);
    const limitTimer = o.overLimit
      ? setInterval(() => {
          void o.overLimit!().then(
            (over) => over && stop("limit"),
            () => undefined,
          );
        }, LIMIT_POLL_MS)
      : undefined;
    const onAbort = () => stop("cancelled");
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout?.on("data", (d: Buffer) => {
      stdout.push(d);
      activity();
    });
    child.stderr?.on("data", (d: Buffer) => {
      stderr.push(d);
      activity();
    });
    if (o.stdin !== "ignore" && child.stdin) {
      child.stdin.on("error", () => {}); // the agent may exit before reading all of it
      child.stdin.end(o.stdin.text);
    }
    const cleanup = () => {
      clearTimeout(stallTimer);
      clearTimeout(wallTimer);
      clearTimeout(killTimer);
      clearInterval(limitTimer);
      o.signal?.removeEventListener("abort", onAbort);
    };
    child.once("error", (err) => {
      spawnError = err.message;
      // No pid: the executable never started (ENOENT, EACCES); "close" may not follow.
      if (child.pid === undefined) {
        cleanup();
        resolve({ reason: "spawn-error", code: null, signal: null, spawnError });
      }
    });
    child.once("close", (code, signal) => {
      cleanup();
      stdout.end();
      stderr.end();
      // Whatever the agent left running in its group (background shells, servers) goes too.
      signalGroup(child, "SIGKILL");
      if (spawnError && child.pid === undefined) resolve({ reason: "spawn-error", code, signal, spawnError });
      else resolve({ reason: stopReason ?? "exited", code, signal });
    });
  });
}

export function signalGroup(child: ChildProcess, signal: NodeJS.Signals) {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

/** Live (non-zombie) processes whose process group is `pgid` (Linux /proc); for checks after a kill. */
export async function livingProcessesInGroup(pgid: number): Promise<number[]> {
  const out: number[] = [];
  let entries: string[];
  try {
    entries = await readdir("/proc");
  } catch {
    return out;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      // Fields after the parenthesized command: state, ppid, pgrp, ...
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(rest[2]) === pgid && rest[0] !== "Z" && rest[0] !== "X") out.push(Number(name));
    } catch {
      // The process went away while we looked.
    }
  }
  return out;
}
