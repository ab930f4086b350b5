import { type ChildProcess, spawn } from "node:child_process";

/**
 * Short programs (git, mostly) run to their end with their output buffered, started by a small helper
 * process rather than by this one. Node starts a program by forking the process that asks (libuv's
 * fork, then exec), and the asking process waits, its event loop stopped, until the copy has exec'd:
 * a cost that grows with the asker's memory. Measured here: 5 ms a program for a 53 MB node process,
 * 11 ms at 185 MB and 17 ms at 313 MB (more on a loaded machine), and the worker and the app are the
 * large ones. A `fleet run` worker with 20 agents spent a third of its event loop's time in these
 * waits, during which it proxied no model request and answered nothing. The helper (node with nothing
 * loaded: ~24 MB of its own, the rest node's binary shared with its parent) does the forking; the
 * caller only sends a message and gets the result.
 *
 * Only processes that ask for it use one (useCommandHelper: the app, a worker, the Action's job): one
 * helper each, started at the first command and ended with its parent (its IPC channel closes). It
 * ignores SIGINT, SIGTERM and SIGHUP, which a terminal sends to the whole process group: the parent
 * decides when work ends, and its last commands (a stopping worker's final commit) still run. A helper
 * killed mid-command leaves that program running; the caller gets a failure (never a success), and the
 * next command a new helper. Where no helper can be started, programs start from this process.
 */

export interface CommandRequest {
  file: string;
  args: readonly string[];
  cwd?: string;
  /** The program's whole environment (nothing of this process's is added). */
  env: Readonly<Record<string, string>>;
  input?: string | Buffer;
}

export interface CommandResult {
  /** null when the program was ended by a signal or never started. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
  /** Why the program could not start or was stopped (ENOENT, output over the cap). */
  error?: string;
}

/** Output kept of one program, as execa's default: a program that writes more is stopped. */
const MAX_OUTPUT_BYTES = 100_000_000;

type Reply = CommandResult & { id: number };
type SpawnFn = typeof spawn;

/**
 * Runs one program to its end and buffers its output. Also the helper's code (see HELPER_SOURCE): it
 * uses nothing but its arguments, so its source runs as it is in a process of its own.
 */
function runOne(spawnFn: SpawnFn, req: CommandRequest, cap: number): Promise<CommandResult> {
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawnFn(req.file, [...req.args], {
        cwd: req.cwd,
        env: req.env,
        stdio: ["pipe", "pipe", "pipe"],
      });
    } catch (e) {
      resolve({
        exitCode: null,
        signal: null,
        stdout: Buffer.alloc(0),
        stderr: Buffer.alloc(0),
        error: (e as Error).message,
      });
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let error: string | undefined;
    // Each stream held to `cap` bytes, as execa holds each.
    const keep = (into: Buffer[]) => {
      let size = 0;
      return (chunk: Buffer) => {
        size += chunk.length;
        if (size > cap) {
          error ??= `output over ${cap} bytes`;
          child.kill("SIGKILL");
          return;
        }
        into.push(chunk);
      };
    };
    child.stdout?.on("data", keep(out));
    child.stderr?.on("data", keep(err));
    child.stdin?.on("error", () => {});
    child.stdin?.end(req.input);
    child.on("error", (e) => {
      error ??= e.message;
    });
    child.on("close", (code, signal) =>
      resolve({
        // A program that never started closes with a negative errno.
        exitCode: code !== null && code < 0 ? null : code,
        signal,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
        ...(error !== undefined ? { error } : {}),
      }),
    );
  });
}

/**
 * The helper's loop: each message a command, each answer its result with the message's id. When its
 * parent is gone (the channel closed) it stops the programs still running and ends.
 */
function serveCommands(proc: NodeJS.Process, spawnFn: SpawnFn, run: typeof runOne, cap: number): void {
  const running = new Set<ChildProcess>();
  const tracked: SpawnFn = ((...a: Parameters<SpawnFn>) => {
    const c = spawnFn(...a);
    running.add(c);
    c.on("close", () => running.delete(c));
    return c;
  }) as SpawnFn;
  for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) proc.on(s, () => {});
  proc.on("disconnect", () => {
    for (const c of running) c.kill("SIGTERM");
    proc.exit(0);
  });
  proc.on("message", (m: CommandRequest & { id: number }) => {
    void run(tracked, m, cap).then((r) => proc.send?.({ ...r, id: m.id }));
  });
}

/**
 * The helper as `node -e` runs it: the two functions above, as this module was compiled. A compiler
 * that keeps function names (esbuild's keepNames, as tsx runs it) calls its `__name` helper inside
 * them; here it is one that does nothing.
 */
const HELPER_SOURCE = `"use strict";
const __name = (f) => f;
const runOne = ${runOne.toString()};
(${serveCommands.toString()})(process, require("node:child_process").spawn, runOne, ${MAX_OUTPUT_BYTES});`;

/** The helper process of this process, and the commands it is running. */
class CommandHelper {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, (r: CommandResult) => void>();
  private nextId = 1;
  ended = false;

  constructor() {
    // Its own environment holds nothing but where programs are: each command brings its whole own.
    this.child = spawn(process.execPath, ["-e", HELPER_SOURCE], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      serialization: "advanced",
      env: process.env.PATH ? { PATH: process.env.PATH } : {},
    });
    this.child.on("exit", (code, signal) => this.end(`it ended (${signal ?? `exit ${code}`})`));
    this.child.on("error", (e) => this.end(e.message));
    this.child.on("message", (m: Reply) => {
      const done = this.pending.get(m.id);
      if (!done) return;
      this.pending.delete(m.id);
      this.refWhileBusy();
      const { id: _id, ...result } = m;
      done({ ...result, stdout: asBuffer(m.stdout), stderr: asBuffer(m.stderr) });
    });
    this.refWhileBusy();
  }

  run(req: CommandRequest): Promise<CommandResult> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.refWhileBusy();
      try {
        this.child.send({ ...req, args: [...req.args], env: { ...req.env }, id }, (e) => {
          if (e) this.end(e.message);
        });
      } catch (e) {
        // The channel closed before the helper's exit was heard.
        this.end((e as Error).message);
      }
    });
  }

  /** Commands under way keep this process alive; an idle helper does not. */
  private refWhileBusy(): void {
    const channel = this.child.channel as { ref(): void; unref(): void } | undefined | null;
    if (this.pending.size) {
      this.child.ref();
      channel?.ref();
    } else {
      this.child.unref();
      channel?.unref();
    }
  }

  /** The helper is gone: what it was running is answered as failed (it may have run: never sent again). */
  private end(why: string): void {
    if (this.ended) return;
    this.ended = true;
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const done of pending)
      done({
        exitCode: null,
        signal: null,
        stdout: Buffer.alloc(0),
        stderr: Buffer.alloc(0),
        error: `Fleet's command helper stopped: ${why}`,
      });
    this.refWhileBusy();
    // A helper still there ends when its channel closes (it ignores SIGTERM), stopping what it runs.
    if (this.child.connected) this.child.disconnect();
  }

  /** The helper's pid while it runs (a cgroup the worker moves into must take it too). */
  get pid(): number | undefined {
    return this.ended ? undefined : this.child.pid;
  }
}

/** IPC's advanced serialization hands a Buffer over as a Uint8Array. */
const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);

let helper: CommandHelper | undefined;
/** Helpers started in this process: one that keeps ending is given up for direct starts. */
let helpersStarted = 0;
const MAX_HELPERS = 5;
/** Whether this process starts its programs through a helper (see useCommandHelper). */
let wanted = false;

/**
 * From now on this process starts its programs through a helper: for the long-running, large ones (the
 * app, a worker, the Action's job). A one-shot command runs a few programs and would pay a node start
 * (~40–200 ms) for a helper; it starts them itself. FLEET_COMMANDS=direct keeps every process direct.
 */
export function useCommandHelper(): void {
  wanted = process.env.FLEET_COMMANDS !== "direct";
}

/** The helper's pid, while this process has one running. */
export function commandHelperPid(): number | undefined {
  return helper?.pid;
}

/** Runs `req` to its end (see the top of this file); never rejects: a failure to start is in `error`. */
export function runProgram(req: CommandRequest): Promise<CommandResult> {
  if (!wanted || helpersStarted > MAX_HELPERS) return runOne(spawn, req, MAX_OUTPUT_BYTES);
  if (!helper || helper.ended) {
    helpersStarted++;
    if (helpersStarted > MAX_HELPERS) return runOne(spawn, req, MAX_OUTPUT_BYTES);
    helper = new CommandHelper();
  }
  return helper.run(req);
}

/** What a program said on stderr, and why it could not start or was stopped (the runner's `error`), a line apart. */
export function stderrOf(r: CommandResult): string {
  return [r.stderr.toString("utf8").trim(), r.error].filter(Boolean).join("\n");
}

/** This process's environment, for a program that is to see all of it (what a plain spawn passes on). */
export function processEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  return env;
}
