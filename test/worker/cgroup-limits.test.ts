// How a worker finds the cgroups it may use, on trees laid out as the kernel lays out a delegated v2
// subtree and a v1 host (files in a scratch folder stand in for /sys/fs/cgroup), and, where this machine
// lets the test write real cgroups, a real run's limits.
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commandHelperPid, runProgram, useCommandHelper } from "../../src/process/command-runner.ts";
import { detectCgroups, limitsEnforcement, openRunCgroup } from "../../src/worker/sandbox/cgroup-limits.ts";

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-cgroups-"));
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe("finding the cgroups a worker may use", () => {
  it("a delegated v2 subtree: controllers enabled for children, limits written as memory.max, pids.max, cpu.max", async () => {
    const own = join(root, "v2", "user.slice", "fleet.service");
    await mkdir(own, { recursive: true });
    await writeFile(join(root, "v2", "cgroup.controllers"), "cpu memory pids\n");
    await writeFile(join(own, "cgroup.controllers"), "cpu memory pids\n");
    await writeFile(join(own, "cgroup.subtree_control"), "");
    const b = await detectCgroups(join(root, "v2"), "0::/user.slice/fleet.service\n");
    expect(b).toEqual({ kind: "cgroup2", parent: own });
    expect(await readFile(join(own, "cgroup.subtree_control"), "utf8")).toBe("+memory +pids +cpu");
    const cg = await openRunCgroup({ memoryMb: 512, pids: 100, cpus: 1.5 }, Promise.resolve(b));
    expect(cg).toBeDefined();
    const [dir] = (await execa("ls", [own])).stdout.split("\n").filter((n) => n.startsWith("fleet-run-"));
    const at = join(own, dir!);
    expect(await readFile(join(at, "memory.max"), "utf8")).toBe(String(512 * 1024 * 1024));
    expect(await readFile(join(at, "pids.max"), "utf8")).toBe("100");
    expect(await readFile(join(at, "cpu.max"), "utf8")).toBe("150000 100000");
    // What the kernel reports when the limits are reached.
    expect(await cg!.hit()).toBeUndefined();
    await writeFile(join(at, "pids.events"), "max 3\n");
    expect(await cg!.hit()).toBe("pids");
    await writeFile(join(at, "memory.events"), "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n");
    expect(await cg!.hit()).toBe("memory");
    // The sandbox enters every cgroup of the run before it starts.
    const entered = cg!.enter("bwrap", ["--die-with-parent"]);
    expect(entered.file).toBe("/bin/sh");
    expect(entered.args).toContain(join(at, "cgroup.procs"));
    expect(entered.args.slice(-2)).toEqual(["bwrap", "--die-with-parent"]);
    // A check while the run's cgroup is being removed reads nothing and opens no file again (a late
    // timer's check would leave it open).
    const closing = cg!.close();
    expect(await cg!.hit()).toBeUndefined();
    await closing;
    const open: string[] = [];
    for (const fd of await readdir("/proc/self/fd"))
      open.push(await readlink(`/proc/self/fd/${fd}`).catch(() => ""));
    expect(open.filter((p) => p.startsWith(at))).toEqual([]);
  });

  it("a v2 subtree still holding the worker: the worker and its command helper move into a leaf before the controllers are enabled", async () => {
    // The kernel refuses subtree_control while processes are in the cgroup; here a folder in its place
    // refuses every write, so the detection gives up, after moving both processes.
    useCommandHelper();
    const helperPid = Number(
      (
        await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env: { PATH: process.env.PATH ?? "" } })
      ).stdout.toString(),
    );
    expect(commandHelperPid()).toBe(helperPid);
    const own = join(root, "v2busy", "fleet.service");
    await mkdir(join(own, "cgroup.subtree_control"), { recursive: true });
    await writeFile(join(root, "v2busy", "cgroup.controllers"), "memory pids\n");
    await writeFile(join(own, "cgroup.controllers"), "memory pids\n");
    const b = await detectCgroups(join(root, "v2busy"), "0::/fleet.service\n");
    expect(b.kind).toBe("none");
    // Each pid is one write to cgroup.procs (as the kernel takes them); the file keeps the last: the helper's.
    expect(await readFile(join(own, "fleet-worker", "cgroup.procs"), "utf8")).toBe(String(helperPid));
  });

  it("a v2 host whose subtree is not the worker's, with no v1: not enforced, and the reason says what to do", async () => {
    const own = join(root, "v2ro", "system.slice");
    await mkdir(own, { recursive: true });
    await writeFile(join(root, "v2ro", "cgroup.controllers"), "memory pids\n");
    await writeFile(join(own, "cgroup.controllers"), "");
    const b = await detectCgroups(join(root, "v2ro"), "0::/system.slice\n");
    expect(b.kind).toBe("none");
    if (b.kind === "none") expect(b.why).toMatch(/Delegate=yes/);
  });

  it("a v1 host: the memory, pids and cpu hierarchies under the worker's own cgroups", async () => {
    const v1 = join(root, "v1");
    for (const c of ["memory/job", "pids", "cpu"]) await mkdir(join(v1, c), { recursive: true });
    const b = await detectCgroups(v1, "4:memory:/job\n8:pids:/\n1:cpu:/\n0::/\n");
    expect(b).toEqual({
      kind: "cgroup1",
      parents: { memory: join(v1, "memory", "job"), pids: join(v1, "pids"), cpu: join(v1, "cpu") },
    });
  });
});

describe("a real run's cgroup on this machine", () => {
  it("holds what the run starts, stops a fork at pids.max, and leaves nothing behind", async () => {
    if ((await limitsEnforcement()).kind === "none") return;
    const openOnCgroups = async () => {
      let n = 0;
      for (const fd of await readdir("/proc/self/fd"))
        if ((await readlink(`/proc/self/fd/${fd}`).catch(() => "")).includes("/fleet-run-")) n++;
      return n;
    };
    const before = await openOnCgroups();
    const cg = (await openRunCgroup({ memoryMb: 256, pids: 20 }))!;
    // sh gives up at the first fork the limit refuses; what it started before stays in the cgroup.
    // A duration of its own: other test files run `sleep` at the same time, and pgrep sees the machine.
    const seconds = `30.${process.pid}${Date.now() % 1000}`;
    const ours = ["-f", `^sleep ${seconds.replace(".", "\\.")}$`];
    const { file, args } = cg.enter("/bin/sh", ["-c", `for i in $(seq 1 60); do sleep ${seconds} & done`]);
    // Read before and after: the events file is read again through the descriptor the first read opened.
    expect(await cg.hit()).toBeUndefined();
    await execa(file, args, { reject: false, stdio: "ignore" });
    expect(await cg.hit()).toBe("pids");
    expect((await execa("pgrep", ours, { reject: false })).stdout.trim()).not.toBe("");
    await cg.close();
    expect((await execa("pgrep", ours, { reject: false })).stdout.trim()).toBe("");
    // A check after the end reads nothing and keeps no file of the removed cgroup open.
    expect(await cg.hit()).toBeUndefined();
    expect(await openOnCgroups()).toBe(before);
  });
});
