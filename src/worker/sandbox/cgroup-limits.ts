import { randomBytes } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";
import { access, mkdir, readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { LimitHit, LimitsEnforcement, ResourceLimits } from "../../core/resource-limits.ts";
import { commandHelperPid } from "../../process/command-runner.ts";

/**
 * Per-run resource limits with cgroups (the kernel's documentation: Documentation/admin-guide/cgroup-v2.rst
 * and cgroup-v1/{memory,pids}.rst). A run's processes are placed in a cgroup of their own before
 * anything of the run starts (a shell writes its own pid, then execs the sandbox), so every process
 * the agent starts is counted and none escapes; when the run ends whatever is left is killed and the
 * cgroup removed.
 *
 * v2 needs a delegated subtree (the worker's own cgroup writable, as systemd gives a service with
 * `Delegate=yes`); v1 needs the memory, pids and cpu hierarchies writable (a root worker on a v1 or
 * hybrid host). Neither: limits are not enforced, and every tracking comment says so.
 */
export interface RunCgroup {
  /** The command that enters the run's cgroups, then runs `file` with `args`. */
  enter(file: string, args: string[]): { file: string; args: string[] };
  /** Which limit the run has reached so far, if any. */
  hit(): Promise<LimitHit | undefined>;
  /** Kills what is left in the cgroup and removes it; never throws. */
  close(): Promise<void>;
}

const CGROUP_ROOT = "/sys/fs/cgroup";
const PREFIX = "fleet-run-";

interface V1Dirs {
  memory: string;
  pids: string;
  cpu?: string;
}
export type Backend =
  | { kind: "cgroup2"; parent: string }
  | { kind: "cgroup1"; parents: V1Dirs }
  | { kind: "none"; why: string };

let detected: Promise<Backend> | undefined;

/** How this worker enforces limits (found once per process). */
export async function limitsEnforcement(): Promise<LimitsEnforcement> {
  const b = await backend();
  return b.kind === "none" ? { kind: "none", why: b.why } : { kind: b.kind };
}

function backend(): Promise<Backend> {
  detected ??= readFile("/proc/self/cgroup", "utf8")
    .then((own) => detectCgroups(CGROUP_ROOT, own))
    .catch((e: Error) => ({ kind: "none", why: e.message }) as const);
  return detected;
}

/** The cgroup path of this process in each hierarchy (`/proc/self/cgroup`: id:controllers:path). */
function ownCgroups(text: string): { v2?: string; v1: Record<string, string> } {
  const v1: Record<string, string> = {};
  let v2: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    if (m[1] === "0" && m[2] === "") v2 = m[3];
    for (const c of m[2]!.split(",")) if (c) v1[c] = m[3]!;
  }
  return { ...(v2 !== undefined ? { v2 } : {}), v1 };
}

const writable = (p: string) =>
  access(p, 2 /* W_OK */).then(
    () => true,
    () => false,
  );
const readText = (p: string) => readFile(p, "utf8").catch(() => "");

/** How limits can be enforced under the cgroup mount `root`, for a process whose /proc/self/cgroup is `self`. */
export async function detectCgroups(root: string, self: string): Promise<Backend> {
  const own = ownCgroups(self);
  // A pure v2 host mounts it at the root; a hybrid one at /unified (its controllers usually all on v1).
  for (const mount of [root, join(root, "unified")]) {
    if (own.v2 === undefined) break;
    if (!(await readText(join(mount, "cgroup.controllers")))) continue;
    const v2 = await delegatedV2(join(mount, own.v2));
    if (v2) return v2;
  }
  const at = (controller: string) =>
    own.v1[controller] !== undefined
      ? join(root, controller, own.v1[controller]!).replace(/\/$/, "")
      : undefined;
  const memory = at("memory");
  const pids = at("pids");
  if (memory && pids && (await writable(memory)) && (await writable(pids))) {
    const cpuDir = at("cpu");
    const cpu = cpuDir && (await writable(cpuDir)) ? cpuDir : undefined;
    await sweepStale([memory, pids, ...(cpu ? [cpu] : [])]);
    return { kind: "cgroup1", parents: { memory, pids, ...(cpu ? { cpu } : {}) } };
  }
  return {
    kind: "none",
    why:
      own.v2 !== undefined && Object.keys(own.v1).length === 0
        ? "its cgroup v2 subtree is not delegated to the worker's user: run the worker as a systemd service with Delegate=yes, or as root"
        : "no cgroup it may write: run the worker as root, or under systemd with Delegate=yes on a cgroup v2 host",
  };
}

/**
 * The worker's own v2 cgroup, usable when it can hold children with the memory and pids controllers:
 * v2 allows processes only in leaves, so the worker first moves itself into a leaf of its own.
 */
async function delegatedV2(own: string): Promise<Backend | undefined> {
  const controllers = (await readText(join(own, "cgroup.controllers"))).split(/\s+/);
  if (!controllers.includes("memory") || !controllers.includes("pids")) return undefined;
  if (!(await writable(join(own, "cgroup.subtree_control")))) return undefined;
  const enable = `+memory +pids${controllers.includes("cpu") ? " +cpu" : ""}`;
  try {
    await writeFile(join(own, "cgroup.subtree_control"), enable);
  } catch {
    // Processes in our own cgroup: move this one and its command helper (src/process/) into a leaf;
    // a git it started a moment ago may still be there, so try a few times (if others stay, give up).
    try {
      const leaf = join(own, "fleet-worker");
      await mkdir(leaf, { recursive: true });
      for (const pid of [process.pid, commandHelperPid()])
        if (pid !== undefined) await writeFile(join(leaf, "cgroup.procs"), String(pid));
      await enableWhenEmpty(join(own, "cgroup.subtree_control"), enable);
    } catch {
      return undefined;
    }
  }
  await sweepStale([own]);
  return { kind: "cgroup2", parent: own };
}

/** Writes `enable` to subtree_control, again for up to ~1 s while the kernel answers EBUSY (a process is still there). */
async function enableWhenEmpty(file: string, enable: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await writeFile(file, enable);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EBUSY" || attempt >= 20) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * Removes the empty run cgroups a worker that died left behind; a live worker's (named by its pid, see
 * openRunCgroup) stay, since one it just made is empty until its run enters it.
 */
async function sweepStale(parents: string[]) {
  for (const parent of parents)
    for (const name of await readdir(parent).catch(() => [] as string[]))
      if (name.startsWith(PREFIX) && !isAlive(Number(name.slice(PREFIX.length).split("-")[0])))
        await rmdir(join(parent, name)).catch(() => undefined);
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * A cgroup (one per hierarchy on v1) for one run, with its limits written; undefined when this
 * worker cannot enforce limits (see `limitsEnforcement` for why).
 */
export async function openRunCgroup(
  limits: ResourceLimits,
  on: Promise<Backend> = backend(),
): Promise<RunCgroup | undefined> {
  const b = await on;
  if (b.kind === "none") return undefined;
  const name = `${PREFIX}${process.pid}-${randomBytes(4).toString("hex")}`;
  const dirs = b.kind === "cgroup2" ? { all: join(b.parent, name) } : v1Dirs(b.parents, name);
  const made: string[] = [];
  try {
    for (const dir of Object.values(dirs)) {
      await mkdir(dir);
      made.push(dir);
    }
    await writeLimits(b.kind, dirs, limits);
  } catch (error) {
    await removeAll(made);
    throw new Error(`the run's cgroup could not be set up: ${(error as Error).message}`);
  }
  const procs = made.map((d) => join(d, "cgroup.procs"));
  const memoryEvents = rereadable(
    b.kind === "cgroup2" ? join(dirs.all!, "memory.events") : join(dirs.memory!, "memory.oom_control"),
  );
  const pidsEvents = rereadable(join(b.kind === "cgroup2" ? dirs.all! : dirs.pids!, "pids.events"));
  return {
    enter(file, args) {
      // The shell moves itself into every cgroup of the run, then becomes the sandbox.
      const script =
        'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';
      return {
        file: "/bin/sh",
        args: ["-c", script, "fleet-limits", String(procs.length), ...procs, file, ...args],
      };
    },
    async hit() {
      if (counter(memoryEvents.read(), "oom_kill") > 0) return "memory";
      if (counter(pidsEvents.read(), "max") > 0) return "pids";
      return undefined;
    },
    close: () => {
      memoryEvents.close();
      pidsEvents.close();
      return removeAll(made);
    },
  };
}

/**
 * A cgroup's events file, read at every limit check of a running agent (twice a second): through one
 * descriptor kept open, each read one pread at offset 0 (the kernel makes the file's text anew for a
 * read from its start), answered at once from the kernel's memory, where readFile's open, stat, read
 * and close each went through the thread pool. "" when it cannot be read (as readText), and once closed.
 */
function rereadable(path: string): { read(): string; close(): void } {
  let fd: number | undefined;
  // After close, a late check reads nothing (it must not open the file again, and leak it).
  let closed = false;
  const buffer = Buffer.alloc(4096);
  const drop = () => {
    if (fd === undefined) return;
    try {
      closeSync(fd);
    } catch {
      // Already gone with its cgroup.
    }
    fd = undefined;
  };
  return {
    read() {
      if (closed) return "";
      try {
        fd ??= openSync(path, "r");
        return buffer.toString("utf8", 0, readSync(fd, buffer, 0, buffer.length, 0));
      } catch {
        // Opened again at the next check.
        drop();
        return "";
      }
    },
    close() {
      closed = true;
      drop();
    },
  };
}

function v1Dirs(parents: V1Dirs, name: string): Record<string, string> {
  return {
    memory: join(parents.memory, name),
    pids: join(parents.pids, name),
    ...(parents.cpu ? { cpu: join(parents.cpu, name) } : {}),
  };
}

async function writeLimits(
  kind: "cgroup1" | "cgroup2",
  dirs: Record<string, string>,
  limits: ResourceLimits,
) {
  const bytes = String(limits.memoryMb * 1024 * 1024);
  const period = 100_000;
  const quota =
    limits.cpus !== undefined ? String(Math.max(1000, Math.round(limits.cpus * period))) : undefined;
  if (kind === "cgroup2") {
    const dir = dirs.all!;
    await writeFile(join(dir, "memory.max"), bytes);
    // No swap beyond the limit, where the kernel has swap accounting.
    await writeFile(join(dir, "memory.swap.max"), "0").catch(() => undefined);
    await writeFile(join(dir, "pids.max"), String(limits.pids));
    if (quota) await writeFile(join(dir, "cpu.max"), `${quota} ${period}`);
    return;
  }
  await writeFile(join(dirs.memory!, "memory.limit_in_bytes"), bytes);
  await writeFile(join(dirs.memory!, "memory.memsw.limit_in_bytes"), bytes).catch(() => undefined);
  await writeFile(join(dirs.pids!, "pids.max"), String(limits.pids));
  if (quota && dirs.cpu) {
    await writeFile(join(dirs.cpu, "cpu.cfs_period_us"), String(period));
    await writeFile(join(dirs.cpu, "cpu.cfs_quota_us"), quota);
  }
}

/** A `key N` line's N in a cgroup events file (0 when absent). */
function counter(text: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** Kills every process left in the cgroups, then removes them (a few tries while the kernel reaps them). */
async function removeAll(dirs: string[]) {
  for (const dir of dirs) {
    await writeFile(join(dir, "cgroup.kill"), "1").catch(() => undefined);
    for (let i = 0; i < 50; i++) {
      const pids = (await readText(join(dir, "cgroup.procs"))).split("\n").filter(Boolean).map(Number);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      try {
        await rmdir(dir);
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }
}
