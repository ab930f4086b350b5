// A worker starting on a machine where other workers run: the sweep of run cgroups left by dead workers
// keeps the live ones' (a run cgroup is empty between its creation and its run entering it).
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { detectCgroups } from "../../src/worker/sandbox/cgroup-limits.ts";

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-cgroup-sweep-"));
});
afterAll(() => rm(root, { recursive: true, force: true }));

it("removes the empty run cgroups of dead workers and keeps those of live ones", async () => {
  const live = `fleet-run-${process.pid}-0a0a0a0a`;
  // Above the kernel's pid_max (4194304): no process has it.
  const dead = "fleet-run-99999999-0b0b0b0b";
  for (const c of ["memory", "pids", "cpu"])
    for (const name of [live, dead]) await mkdir(join(root, c, name), { recursive: true });
  const b = await detectCgroups(root, "4:memory:/\n8:pids:/\n1:cpu:/\n0::/\n");
  expect(b.kind).toBe("cgroup1");
  for (const c of ["memory", "pids", "cpu"]) expect(await readdir(join(root, c))).toEqual([live]);
});
