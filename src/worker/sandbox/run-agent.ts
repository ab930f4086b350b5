import { createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import type { AgentAdapter, AgentCommand, AgentEvent, AgentInvocation } from "../../agents/types.ts";
import type { LimitHit } from "../../core/resource-limits.ts";
import { addUsage, emptyUsage, type RunTotals, type TokenUsage } from "../../core/usage.ts";
import { type RunAgentReason, superviseProcess } from "./agent-process.ts";
import { findCoderCli, makeInside, type SandboxMounts } from "./bubblewrap.ts";
import type { RunCgroup } from "./cgroup-limits.ts";
import { containedCommand } from "./contained-process.ts";
import type { SandboxNetwork } from "./network.ts";

export { LineSplitter, type RunAgentReason } from "./agent-process.ts";

export interface RunAgentOptions {
  /** Wall-clock limit for the whole run. */
  timeoutMs: number;
  /** Kill the agent when it writes nothing (stdout or stderr) for this long. */
  stallMs: number;
  /** How long it has to exit once it reported its end (default EXIT_GRACE_MS). */
  exitGraceMs?: number;
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
  /** The sandbox's network (its own namespace, the forwarder, the proxy variables); absent: the host's. */
  network?: SandboxNetwork;
  /** The run's cgroup: the agent runs inside it, and is stopped when it reaches a limit. */
  cgroup?: RunCgroup;
  /** Folders the sandbox never shows, nor any folder holding one (the worker's HOME, Fleet's folders). */
  forbidden?: readonly string[];
  /** The sandbox's private /tmp's size cap, in bytes. */
  tmpfsBytes?: number;
  /** Applied to every line before it is written to the log (e.g. redaction of known secrets). */
  scrubLog?: (line: string) => string;
}

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
  /** The resource limit the run reached (it was stopped for it). */
  limitHit?: LimitHit;
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

/**
 * Runs one agent CLI to the end: its own process group (in its sandbox when `opts.sandbox` is set), a
 * scrubbed environment, every line logged and parsed, and the whole tree killed on timeout, stall or
 * cancel (SIGTERM, then SIGKILL).
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
  // The network's proxy variables last: what reaches the outside is the run's policy, not a setting.
  const env = {
    ...buildAgentEnv(command, { home, path: opts.path, tmpdir: ownTmp ?? "/tmp" }),
    ...opts.network?.env,
  };
  const log = opts.logFile ? createLogSink(opts.logFile, opts.maxLogBytes) : undefined;
  const output = readAgentOutput(adapter, opts, log);
  const { result } = output;
  if (opts.logFile) result.logPath = opts.logFile;

  let filesDir: string | undefined;
  const finish = async (reason: RunAgentReason, spawnError?: string): Promise<RunAgentResult> => {
    output.conclude(reason, spawnError, { model: inv.model, startedAt, credential: inv.credential?.name });
    if (log) {
      await log.end();
      if (log.error) result.logError = log.error;
    }
    if (ownHome) await rm(ownHome, { recursive: true, force: true }).catch(() => {});
    if (ownTmp) await rm(ownTmp, { recursive: true, force: true }).catch(() => {});
    if (filesDir) await rm(filesDir, { recursive: true, force: true }).catch(() => {});
    return result;
  };

  const settings = await writeHomeFiles(home, command.files ?? [], opts.sandbox);
  filesDir = settings.dir;
  const launch = await launchCommand(command, inv.cwd, home, env, opts, settings.overlay);
  if ("spawnError" in launch) return finish("spawn-error", launch.spawnError);
  const ended = await superviseProcess({
    ...launch,
    cwd: inv.cwd,
    env,
    stdin: command.stdin,
    timeoutMs: opts.timeoutMs,
    stallMs: opts.stallMs,
    killGraceMs: opts.killGraceMs,
    signal: opts.signal,
    onLine: output.handleLine,
    onSpawn: (pid) => {
      result.pid = pid;
    },
    ...(opts.cgroup ? { overLimit: async () => (await opts.cgroup!.hit()) !== undefined } : {}),
    reported: output.reported,
    ...(opts.exitGraceMs !== undefined ? { exitGraceMs: opts.exitGraceMs } : {}),
  });
  if (ended.reason === "spawn-error") return finish("spawn-error", ended.spawnError);
  result.exitCode = ended.code;
  result.signal = ended.signal;
  // A process the kernel killed at the memory limit ends the run before a poll sees it: read it once more.
  const hit = await opts.cgroup?.hit();
  if (hit) {
    result.limitHit = hit;
    return finish("limit");
  }
  // Stopped for not exiting after it reported its end: the run is what it reported, as if it had exited.
  if (ended.reason === "reported") return finish(output.exitReason(0));
  return finish(ended.reason !== "exited" ? ended.reason : output.exitReason(ended.code));
}

/**
 * The adapter's settings files, inside HOME only (a path that climbs out of it is refused). The HOME
 * is the agent's and kept across its runs (plan, work, retries, rebase), so it may hold symlinks the
 * agent left (`~/.gemini/settings.json -> ~/.bashrc` of the worker): nothing is written through them.
 * In a sandbox each file is written to a folder of the worker's own, outside every writable mount, and
 * shown read-only at its place in HOME (`homeOverlay`; the mount point made without following any
 * symlink). Without one, the path is made anew in HOME (components checked with lstat, a symlink or
 * other entry on the way removed, the file created with O_EXCL|O_NOFOLLOW).
 */
async function writeHomeFiles(
  home: string,
  files: NonNullable<AgentCommand["files"]>,
  sandbox: SandboxMounts | undefined,
): Promise<{ overlay: Array<{ source: string; target: string }>; dir?: string }> {
  for (const file of files) {
    const path = join(home, file.path);
    if (relative(home, path).startsWith("..") || isAbsolute(relative(home, path)))
      throw new Error(`agent settings file ${file.path} is outside the agent's HOME`);
  }
  if (files.length === 0) return { overlay: [] };
  // HOME itself is the worker's choice (the agent cannot replace the folder, only what is in it).
  await mkdir(home, { recursive: true });
  if (!sandbox) {
    for (const file of files)
      await makeInside(home, relative(home, join(home, file.path)), "file", {
        replace: true,
        content: file.content,
      });
    return { overlay: [] };
  }
  const dir = await mkdtemp(join(tmpdir(), "fleet-agent-files-"));
  const writable = [...sandbox.writable, home].map((p) => resolve(p));
  if (writable.some((w) => dir === w || dir.startsWith(`${w}${sep}`) || w.startsWith(`${dir}${sep}`))) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`${dir} for the agent's settings files lies in a folder the agent can write`);
  }
  const overlay: Array<{ source: string; target: string }> = [];
  try {
    for (const [i, file] of files.entries()) {
      const source = join(dir, String(i));
      await writeFile(source, file.content, { mode: 0o600, flag: "wx" });
      const rel = relative(home, join(home, file.path));
      await makeInside(home, rel, "file", { replace: true });
      overlay.push({ source, target: join(home, rel) });
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return { overlay, dir };
}

/** The file and arguments to start: the agent's executable, contained as the options say. */
async function launchCommand(
  command: AgentCommand,
  cwd: string,
  home: string,
  env: Record<string, string>,
  opts: RunAgentOptions,
  settingsOverlay: Array<{ source: string; target: string }>,
): Promise<{ file: string; args: string[] } | { spawnError: string }> {
  // Not on PATH: the CLI installed with Fleet (its dependencies), found without touching PATH.
  const file = opts.binaryPath ?? (await findCoderCli(command.file, env.PATH)) ?? command.file;
  const mounts: SandboxMounts | undefined = opts.sandbox && {
    ...opts.sandbox,
    // Fleet's settings files last: they win over an inherited file of the same name.
    homeOverlay: [...(opts.sandbox.homeOverlay ?? []), ...settingsOverlay],
  };
  return containedCommand(
    file,
    command.args,
    { cwd, home, path: env.PATH ?? "" },
    {
      ...(mounts ? { mounts } : {}),
      ...(opts.network ? { network: opts.network } : {}),
      ...(opts.cgroup ? { cgroup: opts.cgroup } : {}),
      ...(opts.forbidden ? { forbidden: opts.forbidden } : {}),
      ...(opts.tmpfsBytes ? { tmpfsBytes: opts.tmpfsBytes } : {}),
    },
  );
}

/**
 * The agent's output as it comes: every line to the (scrubbed) log and the adapter's parser, the
 * events counted and passed on; at the end, the run's result from its final event and errors.
 */
function readAgentOutput(
  adapter: AgentAdapter,
  opts: RunAgentOptions,
  log: ReturnType<typeof createLogSink> | undefined,
) {
  const result: RunAgentResult = { exitCode: null, signal: null, reason: "failed", errors: [], events: 0 };
  let finalResult: Extract<AgentEvent, { type: "result" }> | undefined;
  let lastRateLimit: RunAgentResult["rateLimit"];
  // For a CLI that reports no final figures (opencode): its usage reports, one per model message.
  const usages = new Map<string, Partial<TokenUsage>>();
  const handleEvent = (e: AgentEvent) => {
    result.events++;
    if (e.type === "init" && e.sessionId) result.sessionId = e.sessionId;
    else if (e.type === "usage") usages.set(e.id ?? `#${usages.size}`, e.usage);
    else if (e.type === "result") {
      finalResult = e;
      if (e.sessionId) result.sessionId = e.sessionId;
    } else if (e.type === "rate_limit") {
      lastRateLimit = { resetsAt: e.resetsAt, retryAfterSeconds: e.retryAfterSeconds, message: e.message };
    } else if (e.type === "error") result.errors.push(e.message);
    opts.onEvent?.(e);
  };
  const scrub = opts.scrubLog ?? ((l: string) => l);
  return {
    result,
    handleLine(line: string, stream: "stdout" | "stderr") {
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
    },
    /** Whether the agent reported its end (its final result event). */
    reported: () => finalResult !== undefined,
    /** How a run that exited by itself ended: its exit code and its final event say. */
    exitReason(code: number | null): RunAgentReason {
      if (code === 0 && finalResult?.ok !== false) return "completed";
      return lastRateLimit ? "rate-limited" : "failed";
    },
    conclude(
      reason: RunAgentReason,
      spawnError: string | undefined,
      run: { model: string; startedAt: number; credential?: string },
    ) {
      result.reason = reason;
      if (spawnError) result.spawnError = spawnError;
      if (!finalResult && usages.size > 0) {
        const usage = [...usages.values()].reduce<TokenUsage>(addUsage, emptyUsage());
        const totals = { usage, costUsd: null, turns: usages.size, durationMs: 0, model: "" };
        finalResult = { type: "result", ok: reason === "completed", totals };
      }
      if (finalResult) {
        const t = finalResult.totals;
        result.totals = {
          ...t,
          model: t.model || run.model,
          durationMs: t.durationMs || Date.now() - run.startedAt,
          ...(run.credential ? { credential: run.credential } : {}),
        };
        result.summary = finalResult.summary;
      }
      if (reason === "completed") return;
      if (lastRateLimit) result.rateLimit = lastRateLimit;
      const failedSummary = finalResult && !finalResult.ok ? finalResult.summary : undefined;
      const message = spawnError ?? failedSummary ?? result.errors.at(-1) ?? lastRateLimit?.message;
      if (message) result.error = message;
    },
  };
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

export { livingProcessesInGroup } from "./agent-process.ts";
