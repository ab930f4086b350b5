// The pieces the scale benchmarks share around real `fleet run` processes: CPU accounting per process
// tree (a cpuacct cgroup, v1, which counts processes that already ended), a `bwrap` on PATH that notes
// when each sandbox was launched and books its CPU apart, the stand-in agent installed as `claude`,
// a per-process reverse proxy to the emulator that tells whose request each is, and the processes
// themselves.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { chmod, readFile, realpath, symlink } from "node:fs/promises";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";

const HERE = import.meta.dirname;
export const FLEET_BIN = resolve(HERE, "../../bin/fleet.js");
export const NODE_BIN = resolve(HERE, "../../node_modules/.bin");

/** A cpuacct cgroup: the CPU time of every process put in it and of their children, ended or not. */
export interface CpuGroup {
  path: string;
  /** CPU time so far, ms; NaN when cgroups are not writable here. */
  usageMs(): number;
  remove(): void;
}

export function cpuGroup(name: string): CpuGroup {
  const path = `/sys/fs/cgroup/cpuacct/${name}`;
  let ok = true;
  try {
    mkdirSync(path, { recursive: true });
  } catch {
    ok = false;
  }
  return {
    path,
    usageMs: () => (ok ? Number(readFileSync(join(path, "cpuacct.usage"), "utf8")) / 1e6 : Number.NaN),
    remove() {
      // A cgroup with no process left can be removed; one still holding a straggler stays (harmless).
      try {
        if (ok && existsSync(path)) rmdirSync(path);
      } catch {
        // still in use
      }
    },
  };
}

/**
 * A folder to put first on a worker's PATH: `bwrap` notes "<pid> <epoch ns> <--chdir folder>" in
 * `bwrapLog` for every sandbox, moves itself (and so the whole sandbox) into `sandboxGroup`, then runs
 * the real bwrap. With `standIn`, `claude` is the stand-in agent (bench/lib/stand-in-claude.mjs).
 */
export async function shimFolder(
  dir: string,
  o: { bwrapLog: string; sandboxGroup?: CpuGroup; standIn: boolean; gitLog?: string },
): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const bwrap = join(dir, "bwrap");
  const enter = o.sandboxGroup ? `echo $$ > ${o.sandboxGroup.path}/cgroup.procs 2>/dev/null\n` : "";
  // bash's EPOCHREALTIME: the time without a `date` process.
  writeFileSync(
    bwrap,
    `#!/bin/bash\nt=$EPOCHREALTIME\nd=; p=\nfor a in "$@"; do [ "$p" = "--chdir" ] && d=$a; p=$a; done\necho "$$ $t $d" >> ${o.bwrapLog}\n${enter}exec /usr/bin/bwrap "$@"\n`,
  );
  await chmod(bwrap, 0o755);
  if (o.gitLog) {
    // Every git command of the worker: when, where (its folder) and which subcommand.
    writeFileSync(
      join(dir, "git"),
      [
        "#!/bin/bash",
        'a="$*"; t=$EPOCHREALTIME',
        'e=$(mktemp 2>/dev/null) || exec /usr/bin/git "$@"',
        '/usr/bin/git "$@" 2>"$e"; rc=$?',
        'cat "$e" >&2',
        // When it started and ended, where, what; a failing command's end (its subcommand past git's -c
        // options) and its error beside (Fleet reads it too).
        `echo "$t $EPOCHREALTIME $PWD \${a:0:800}" >> ${o.gitLog} 2>/dev/null`,
        `[ $rc -ne 0 ] && { echo "rc=$rc $PWD \${a:$((\${#a}>300?\${#a}-300:0))}"; head -c 600 "$e"; echo; } >> ${o.gitLog}.failed 2>/dev/null`,
        'rm -f "$e"',
        "exit $rc",
        "",
      ].join("\n"),
    );
    await chmod(join(dir, "git"), 0o755);
  }
  if (o.standIn) {
    // Run by the worker's own node (the sandbox mounts an interpreter outside the system folders).
    const node = await realpath(process.execPath);
    const script = join(dir, "stand-in-claude.mjs");
    const text = await readFile(join(HERE, "stand-in-claude.mjs"), "utf8");
    writeFileSync(script, text.replace(/^#!.*\n/, `#!${node}\n`));
    await chmod(script, 0o755);
    // A symlink, not a copy: node reads the resolved .mjs as a module.
    await symlink(script, join(dir, "claude"));
  }
  return dir;
}

/** Parsed lines of a git shim log: when it started and ended (epoch ms), in which folder, its arguments. */
export function readGitLog(file: string): Array<{ atMs: number; endMs: number; cwd: string; args: string }> {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const [start, end, cwd, ...args] = l.split(" ");
      return {
        atMs: Number(start) * 1000,
        endMs: Number(end) * 1000,
        cwd: cwd ?? "",
        args: args.join(" ").trim(),
      };
    });
}

/** Parsed lines of a bwrap shim log: which sandbox started when, in which folder. */
export function readBwrapLog(file: string): Array<{ pid: number; atMs: number; dir: string }> {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const [pid, seconds, dir] = l.split(" ");
      return { pid: Number(pid), atMs: Number(seconds) * 1000, dir: dir ?? "" };
    });
}

export interface LoggedCall {
  at: number;
  method: string;
  path: string;
  status: number;
  /** git-upload-pack / git-receive-pack for git smart HTTP, else undefined (REST). */
  git?: string;
}

/**
 * A reverse proxy to `upstream` that logs every request passing through it: one per worker process,
 * given as its API URL, so each REST and git request is known to be that worker's (the state
 * branch's git URL is derived from the API URL's origin).
 */
export async function countingProxy(upstream: string): Promise<{
  url: string;
  calls: LoggedCall[];
  stop(): Promise<void>;
}> {
  const up = new URL(upstream);
  const calls: LoggedCall[] = [];
  const server = createServer((req, res) => {
    const at = Date.now();
    const path = req.url ?? "/";
    const service =
      /[?&]service=(git-[\w-]+)/.exec(path)?.[1] ?? /\/(git-(?:upload|receive)-pack)$/.exec(path)?.[1];
    const out = httpRequest(
      // A fresh connection each time: a kept-alive one the server is closing gets a reset.
      { host: up.hostname, port: up.port, method: req.method, path, headers: req.headers, agent: false },
      (r) => {
        calls.push({ at, method: req.method ?? "GET", path, status: r.statusCode ?? 0, git: service });
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** One `node bin/fleet.js <args>` in `group` (entered before node starts), its output kept. */
export function startFleet(
  args: string[],
  o: { cwd: string; env: Record<string, string>; group?: CpuGroup; opsLog?: string },
): ChildProcess & { output: () => string } {
  const preload = `--import=${join(HERE, "state-ops-preload.mjs")}`;
  const env = {
    ...o.env,
    ...(o.opsLog ? { FLEET_BENCH_OPS_LOG: o.opsLog, NODE_OPTIONS: preload } : {}),
  };
  // BENCH_FLEET_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=…": node's options for the fleet processes (a profile).
  if (process.env.BENCH_FLEET_NODE_OPTIONS)
    env.NODE_OPTIONS = [env.NODE_OPTIONS, process.env.BENCH_FLEET_NODE_OPTIONS].filter(Boolean).join(" ");
  const enter = o.group ? `echo $$ > ${o.group.path}/cgroup.procs 2>/dev/null; ` : "";
  const child = spawn("/bin/sh", ["-c", `${enter}exec "$0" "$@"`, process.execPath, FLEET_BIN, ...args], {
    cwd: o.cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  }) as ChildProcess & { output: () => string };
  let text = "";
  const keep = (d: Buffer) => {
    text += d.toString("utf8");
    if (text.length > 4 << 20) text = text.slice(-(2 << 20));
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  child.output = () => text;
  return child;
}

/** Resolves with the exit code when the process ends. */
export const exited = (child: ChildProcess): Promise<number | null> =>
  child.exitCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((r) => child.once("exit", (code) => r(code)));

/** The lines of an ops log (see state-ops-preload.mjs). */
export function readOpsLog(file: string): Array<{
  t: number;
  pid: number;
  phase: "start" | "end";
  operation: "fetch" | "push";
  cause: string;
  rejected?: boolean;
}> {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** Environment for a `fleet run` process: the host's basics, node_modules/.bin and `shims` first on PATH. */
export function workerEnv(shims: string | undefined, extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  // FLEET_COMMANDS=direct: programs started by the worker itself, not its helper (README, before and after).
  // FLEET_RUN_NODE_FLAGS: the worker's node flags, as a user gives them (set, even empty, it is passed).
  for (const k of ["HOME", "TMPDIR", "LANG", "USER", "FLEET_COMMANDS"])
    if (process.env[k]) env[k] = process.env[k]!;
  if (process.env.FLEET_RUN_NODE_FLAGS !== undefined)
    env.FLEET_RUN_NODE_FLAGS = process.env.FLEET_RUN_NODE_FLAGS;
  const path = [shims, NODE_BIN, process.env.PATH].filter(Boolean).join(":");
  return { ...env, PATH: path, ...extra };
}
