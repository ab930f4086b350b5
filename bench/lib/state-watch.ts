// When each task entered each state, as seen by reading the state every `intervalMs` (local mode's
// state file, or the state branch of the emulator's bare repository), and the times slots were freed.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ACTIVE_STATES } from "../../src/core/lifecycle.ts";
import type { Task } from "../../src/core/task.ts";

const run = promisify(execFile);

export type ReadTasks = () => Promise<Record<string, Task> | undefined>;

/** Local mode: `$FLEET_HOME/state/.fleet/state.json`. */
export const localStateReader =
  (home: string): ReadTasks =>
  async () => {
    const text = await readFile(join(home, "state", ".fleet", "state.json"), "utf8").catch(() => "");
    return text ? (JSON.parse(text) as { tasks: Record<string, Task> }).tasks : undefined;
  };

/** GitHub mode: the state branch of the emulator's bare repository. */
export const branchStateReader =
  (gitDir: string, branch = "fleet/state"): ReadTasks =>
  async () => {
    const r = await run("git", ["-C", gitDir, "cat-file", "blob", `${branch}:.fleet/state.json`], {
      maxBuffer: 64 << 20,
    }).catch(() => undefined);
    return r ? (JSON.parse(r.stdout) as { tasks: Record<string, Task> }).tasks : undefined;
  };

export interface StateWatch {
  /** Task id -> state -> first time seen in it (epoch ms). */
  seen: Map<string, Map<string, number>>;
  /** Times a task was first seen out of the slot-holding states after holding a slot. */
  releases: number[];
  /** The most tasks seen holding slots at once. */
  maxActive: number;
  last: Record<string, Task>;
  stop(): Promise<void>;
}

export function watchState(read: ReadTasks, intervalMs: number): StateWatch {
  const seen = new Map<string, Map<string, number>>();
  const releases: number[] = [];
  const holding = new Set<string>();
  const w: StateWatch = {
    seen,
    releases,
    maxActive: 0,
    last: {},
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
  let stopped = false;
  const tick = async () => {
    const tasks = await read().catch(() => undefined);
    if (!tasks) return;
    const now = Date.now();
    w.last = tasks;
    let active = 0;
    for (const t of Object.values(tasks)) {
      const states = seen.get(t.id) ?? new Map<string, number>();
      if (!states.has(t.state)) states.set(t.state, now);
      seen.set(t.id, states);
      if (ACTIVE_STATES.has(t.state)) {
        active++;
        holding.add(t.id);
      } else if (holding.delete(t.id)) releases.push(now);
    }
    w.maxActive = Math.max(w.maxActive, active);
  };
  const loop = (async () => {
    while (!stopped) {
      const t0 = Date.now();
      await tick();
      await new Promise((r) => setTimeout(r, Math.max(0, intervalMs - (Date.now() - t0))));
    }
    await tick();
  })();
  return w;
}
