import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, readdir, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StringDecoder } from "node:string_decoder";
import type { AgentAdapter, AgentCommand, AgentEvent, AgentInvocation } from "../agents/types.ts";
import type { RunTotals } from "../core/usage.ts";
import { bubblewrapArgs, executableMounts, resolveExecutable, type SandboxMounts } from "./sandbox.ts";

export interface RunAgentOptions {
  /** Wall-clock limit for the whole run. */
  timeoutMs: number;
  /** Kill the agent when it writes nothing (stdout or stderr) for this long. */
  stallMs: number;
  signal?: AbortSignal;
  onEvent?: (e: AgentEvent) => void;
  onLine?: (line: string, stream: "stdout" | "stderr") => void;
  /** Every raw line goes here (stderr lines prefixed with "[stderr] "). */
  logFile?: string;
  /** Path of the agent executable; default: the command's file looked up on PATH. */
  binaryPath?: string;
  /** PATH for the agent; default: this process's PATH. */
  path?: string;
  /** Time between SIGTERM and SIGKILL of the process group. */
  killGraceMs?: number;
  /** Cap on the log file: beyond it the middle of the output is left out with a note. */
  maxLogBytes?: number;
  /**
   * Run the agent in a bubblewrap sandbox that shows it only these paths (plus the system folders,
   * its own executable's package and its HOME, writable). Absent: a plain child process.
   */
  sandbox?: SandboxMounts;
  /** Applied to every line before it is written to the log (e.g. redaction of known secrets). */
  scrubLog?: (line: string) => string;
}

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
  | "spawn-error";

export interface RunAgentResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  reason: RunAgentReason;
  /** The agent's own final figures (model, duration and credential filled in when it reports none). */
  totals?: RunTotals;
  sessionId?: string;
  /** The last rate limit the agent reported, when the run did not complete (a reason to wait and retry). */
  rateLimit?: { resetsAt?: string; retryAfterSeconds?: number; message: string };
  /** The agent's final message, when it gave one. */
  summary?: string;
  /** Error messages the agent reported (also for runs that completed after retrying). */
  errors: string[];
  /** For runs that did not complete: the most telling message (spawn error, failed result, last error). */
  error?: string;
  events: number;
  pid?: number;
  logPath?: string;
  /** Why the log could not be (fully) written, e.g. the disk is full; the run itself went on. */
  logError?: string;
  spawnError?: string;
}

/** Variables every agent gets besides its own; nothing else of this process's environment is passed on. */
export const AGENT_BASE_ENV_KEYS = ["PATH", "HOME", "LANG", "TMPDIR"] as const;

/**
 * The agent's whole environment: a minimal base (PATH, HOME, LANG, TMPDIR) plus the adapter's own
 * variables (its one credential, base URL, telemetry switches). process.env is never copied, so
 * GitHub App keys, webhook secrets and tokens of the Fleet process cannot reach an agent.
 */
export function buildAgentEnv(
  command: Pick<AgentCommand, "env">,
  base: { home: string; path?: string; lang?: string; tmpdir?: string },
): Record<string, string> {
  return {
    PATH: base.path ?? process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: base.home,
    LANG: base.lang ?? "C.UTF-8",
    TMPDIR: base.tmpdir ?? tmpdir(),
    ...command.env,
  };
}

/** Splits a byte stream into lines: partial chunks, CRLF, multi-byte characters across chunks, huge lines. */
export class LineSplitter {
  private decoder = new StringDecoder("utf8");
  private buf = "";
  constructor(
    private readonly onLine: (line: string) => void,
    /** A line longer than this is passed on in pieces, so one runaway line cannot exhaust memory. */
    private readonly maxLineLength = 32 * 1024 * 1024,
  ) {}

  push(chunk: Buffer | string): void {
    this.buf += typeof chunk === "string" ? chunk : this.decoder.write(chunk);
    let start = 0;
    for (let nl = this.buf.indexOf("\n", start); nl !== -1; nl = this.buf.indexOf("\n", start)) {
      this.emit(this.buf.slice(start, nl));
      start = nl + 1;
    }
    this.buf = start === 0 ? this.buf : this.buf.slice(start);
    while (this.buf.length > this.maxLineLength) {
      this.onLine(this.buf.slice(0, this.maxLineLength));
      this.buf = this.buf.slice(this.maxLineLength);
    }
  }

  end(): void {
    this.buf += this.decoder.end();
    if (this.buf.length > 0) this.emit(this.buf);
    this.buf = "";
  }

  private emit(line: string) {
    this.onLine(line.endsWith("\r") ? line.slice(0, -1) : line);
  }
}

/**
 * Runs one agent CLI to the end: its own process group, a scrubbed environment, every line logged
 * and parsed, and the whole tree killed on timeout, stall or cancel (SIGTERM, then SIGKILL).
 */
export async function runAgent(
  adapter: AgentAdapter,
  inv: AgentInvocation,
  opts: RunAgentOptions,
): Promise<RunAgentResult> {
  const startedAt = Date.now();
  // Without a given HOME the agent gets a fresh one, removed afterwards (no session to resume then).
  const ownHome = inv.home ? undefined : await mkdtemp(join(tmpdir(), "fleet-agent-home-"));
  const home = inv.home ?? ownHome!;
  const sandboxed = opts.sandbox !== undefined;
  const command = adapter.command({ ...inv, home, ...(sandboxed ? { sandboxed } : {}) });
  // A private TMPDIR: inside a sandbox its own /tmp; outside, a fresh folder that is not above HOME
  // (Codex refuses to set up its own sandbox helper when its home lies inside the temp folder).
  const ownTmp = sandboxed ? undefined : await mkdtemp(join(tmpdir(), "fleet-agent-tmp-"));
  const env = buildAgentEnv(command, { home, path: opts.path, tmpdir: ownTmp ?? "/tmp" });

  const log = opts.logFile ? createLogSink(opts.logFile, opts.maxLogBytes) : undefined;
  const result: RunAgentResult = { exitCode: null, signal: null, reason: "failed", errors: [], events: 0 };
  if (opts.logFile) result.logPath = opts.logFile;

  let finalResult: Extract<AgentEvent, { type: "result" }> | undefined;
  let lastRateLimit: RunAgentResult["rateLimit"];
  const handleEvent = (e: AgentEvent) => {
    result.events++;
    if (e.type === "init" && e.sessionId) result.sessionId = e.sessionId;
    else if (e.type === "result") {
      finalResult = e;
      if (e.sessionId) result.sessionId = e.sessionId;
    } else if (e.type === "rate_limit") {
      lastRateLimit = { resetsAt: e.resetsAt, retryAfterSeconds: e.retryAfterSeconds, message: e.message };
    } else if (e.type === "error") result.errors.push(e.message);
    opts.onEvent?.(e);
  };
  const scrub = opts.scrubLog ?? ((l: string) => l);
  const handleLine = (line: string, stream: "stdout" | "stderr") => {
    if (log) log.write(stream === "stdout" ? `${scrub(line)}\n` : `[stderr] ${scrub(line)}\n`);
    opts.onLine?.(line, stream);
    if (stream !== "stdout") return;
    let events: AgentEvent[];
    try {
      events = adapter.parseLine(line);
    } catch {
      events = [{ type: "unknown", raw: line }];
    }
    for (const e of events) handleEvent(e);
  };

  let file = opts.binaryPath ?? command.file;
  let args = command.args;
  if (opts.sandbox) {
    const executable = await resolveExecutable(file, env.PATH);
    if (!executable)
      return finish({ reason: "spawn-error", spawnError: `${file} was not found on PATH (${env.PATH})` });
    const mounts: SandboxMounts = {
      ...opts.sandbox,
      writable: [...opts.sandbox.writable, home],
      readOnly: [...opts.sandbox.readOnly, ...(await executableMounts(executable))],
    };
    args = [...(await bubblewrapArgs(mounts, inv.cwd)), await realpath(executable), ...command.args];
    file = "bwrap";
  }

  let child: ChildProcess;
  try {
    child = spawn(file, args, {
      cwd: inv.cwd,
      env,
      detached: true,
      stdio: [command.stdin === "ignore" ? "ignore" : "pipe", "pipe", "pipe"],
    });
  } catch (err) {
    return finish({ reason: "spawn-error", spawnError: String(err) });
  }
  result.pid = child.pid;

  const outcome = await new Promise<{
    reason: RunAgentReason | "exited";
    code: number | null;
    signal: NodeJS.Signals | null;
    spawnError?: string;
  }>((resolve) => {
    let stopReason: RunAgentReason | undefined;
    let spawnError: string | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const stdout = new LineSplitter((l) => handleLine(l, "stdout"));
    const stderr = new LineSplitter((l) => handleLine(l, "stderr"));

    const stop = (reason: RunAgentReason) => {
      if (stopReason) return;
      stopReason = reason;
      signalGroup(child, "SIGTERM");
      killTimer = setTimeout(() => signalGroup(child, "SIGKILL"), opts.killGraceMs ?? 3000);
    };
    let stallTimer = setTimeout(() => stop("stall"), opts.stallMs);
    const activity = () => {
      clearTimeout(stallTimer);
      if (!stopReason) stallTimer = setTimeout(() => stop("stall"), opts.stallMs);
    };
    const wallTimer = setTimeout(() => stop("timeout"), opts.timeoutMs);
    const onAbort = () => stop("cancelled");
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });

    child.stdout?.on("data", (d: Buffer) => {
      activity();
      stdout.push(d);
    });
    child.stderr?.on("data", (d: Buffer) => {
      activity();
      stderr.push(d);
    });
    if (command.stdin !== "ignore" && child.stdin) {
      child.stdin.on("error", () => {}); // the agent may exit before reading all of it
      child.stdin.end(command.stdin.text);
    }
    const cleanup = () => {
      clearTimeout(stallTimer);
      clearTimeout(wallTimer);
      clearTimeout(killTimer);
      opts.signal?.removeEventListener("abort", onAbort);
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

  if (outcome.reason === "spawn-error")
    return finish({ reason: "spawn-error", spawnError: outcome.spawnError });
  result.exitCode = outcome.code;
  result.signal = outcome.signal;
  const reason: RunAgentReason =
    outcome.reason !== "exited"
      ? outcome.reason
      : outcome.code === 0 && finalResult?.ok !== false
        ? "completed"
        : lastRateLimit
          ? "rate-limited"
          : "failed";
  return finish({ reason });

  async function finish(end: { reason: RunAgentReason; spawnError?: string }): Promise<RunAgentResult> {
    result.reason = end.reason;
    if (end.spawnError) result.spawnError = end.spawnError;
    if (finalResult) {
      const t = finalResult.totals;
      result.totals = {
        ...t,
        model: t.model || inv.model,
        durationMs: t.durationMs || Date.now() - startedAt,
        ...(inv.credential ? { credential: inv.credential.name } : {}),
      };
      result.summary = finalResult.summary;
    }
    if (end.reason !== "completed" && lastRateLimit) result.rateLimit = lastRateLimit;
    if (end.reason !== "completed") {
      const failedSummary = finalResult && !finalResult.ok ? finalResult.summary : undefined;
      const message = end.spawnError ?? failedSummary ?? result.errors.at(-1) ?? lastRateLimit?.message;
      if (message) result.error = message;
    }
    if (log) {
      await log.end();
      if (log.error) result.logError = log.error;
    }
    if (ownHome) await rm(ownHome, { recursive: true, force: true }).catch(() => {});
    if (ownTmp) await rm(ownTmp, { recursive: true, force: true }).catch(() => {});
    return result;
  }
}

/** Default cap on one agent log (the first and the last half are kept). */
export const DEFAULT_MAX_LOG_BYTES = 8 * 1024 * 1024;

/**
 * An agent's log file, bounded: the first half of `maxBytes` is written as it comes; after that only
 * the latest half is kept (in memory), written at the end behind a note saying how much was left
 * out. A failed write (disk full, file gone) stops the logging, never the run: `error` says why.
 */
export function createLogSink(path: string, maxBytes = DEFAULT_MAX_LOG_BYTES) {
  const stream = createWriteStream(path, { flags: "a" });
  let error: string | undefined;
  stream.on("error", (e) => {
    error ??= e.message;
  });
  const headCap = Math.floor(maxBytes / 2);
  const tailCap = maxBytes - headCap;
  let headBytes = 0;
  let tail: string[] = [];
  let tailStart = 0;
  let tailBytes = 0;
  let leftOutLines = 0;
  let leftOutBytes = 0;
  return {
    get error() {
      return error;
    },
    write(text: string): void {
      if (error) return;
      const n = Buffer.byteLength(text);
      if (tail.length === 0 && headBytes + n <= headCap) {
        headBytes += n;
        stream.write(text);
        return;
      }
      // One runaway line keeps only its end.
      const kept = n > tailCap ? text.slice(-Math.floor(tailCap / 4)) : text;
      if (kept !== text) {
        leftOutBytes += n - Buffer.byteLength(kept);
      }
      tail.push(kept);
      tailBytes += Buffer.byteLength(kept);
      while (tailBytes > tailCap && tail.length - tailStart > 1) {
        const dropped = tail[tailStart]!;
        tail[tailStart++] = "";
        tailBytes -= Buffer.byteLength(dropped);
        leftOutBytes += Buffer.byteLength(dropped);
        leftOutLines++;
      }
      // Compact now and then, so dropping from the front stays cheap.
      if (tailStart > 4096 && tailStart * 2 > tail.length) {
        tail = tail.slice(tailStart);
        tailStart = 0;
      }
    },
    /** Writes the kept tail (behind its note) and closes the file; never throws. */
    async end(): Promise<void> {
      if (!error) {
        if (leftOutBytes > 0) {
          stream.write(
            `[fleet] log truncated: ${leftOutLines.toLocaleString("en-US")} lines (${leftOutBytes.toLocaleString("en-US")} bytes) of output left out here; the log keeps the first and the last ${tailCap.toLocaleString("en-US")} bytes.\n`,
          );
        }
        for (let i = tailStart; i < tail.length; i++) stream.write(tail[i]!);
      }
      tail = [];
      // A failed write destroys the stream at once but reports on a later tick: wait for "close".
      await new Promise<void>((resolve) => {
        if (stream.closed) return resolve();
        stream.once("close", () => resolve());
        if (!stream.destroyed) stream.end();
      });
      error ??= stream.errored?.message;
    },
  };
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals) {
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
