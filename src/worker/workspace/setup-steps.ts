import { access, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { NetworkPolicy, RefusedConnection } from "../../core/network-policy.ts";
import { limitHitReason, type ResourceLimits } from "../../core/resource-limits.ts";
import { type RunAgentReason, superviseProcess } from "../sandbox/agent-process.ts";
import { interpreterMounts, type SandboxMode } from "../sandbox/bubblewrap.ts";
import { containedCommand } from "../sandbox/contained-process.ts";
import { withRunContainment } from "../sandbox/contained-run.ts";
import { createLogSink } from "../sandbox/run-agent.ts";
import { SETUP_LOG_FILE } from "./artifacts.ts";
import { contentIdsOf, gitIn } from "./git.ts";
import { restoreSetupCache, saveSetupCache, setupCacheKey } from "./setup-cache.ts";
import type { Worktree } from "./worktree.ts";

/** What a repository's `setup` asks, and where and how it runs. */
export interface SetupSpec {
  commands: readonly string[];
  /** `setup_cache`: folders kept between tasks. */
  cache: readonly string[];
  /** `setup_network`, else the agent's `network`. */
  network: NetworkPolicy;
}

export interface SetupRun {
  repo: string;
  workDir: string;
  artifactsDir: string;
  home: string;
  sandbox: SandboxMode;
  /**
   * The agent's `network`: setup's on a task branch an earlier run pushed, whose commits (a lockfile,
   * an install script) are an agent's, so they never run with a wider `setup_network`.
   */
  agentNetwork: NetworkPolicy;
  limits?: ResourceLimits;
  egressHosts?: Readonly<Record<string, string>>;
  forbidden?: readonly string[];
  timeouts: { runMs: number; stallMs: number };
  signal?: AbortSignal;
  redact: (text: string) => string;
  log?: (step: string) => void;
}

export type SetupResult =
  | { ok: true; ran: number; cache?: "restored" | "saved"; refused: RefusedConnection[] }
  | { ok: false; reason: string; refused: RefusedConnection[] };

/** Lines of a failed step's output shown on the issue, and how much of each. */
const TAIL_LINES = 30;
const TAIL_LINE_CHARS = 1000;

/**
 * The repository's setup commands, in the task's worktree, before any agent: each in the same sandbox
 * as the agent (the worktree and the run's HOME writable, nothing of the worker's), under the setup
 * network (the agent's on a task branch an earlier run pushed: it runs the agent's commits) and the
 * run's limits, its output in `setup.log` (bounded). A cached result is restored instead when there is
 * one. What setup made is then recorded as not the agent's (`recordSetupMade`): it is never committed.
 * A failing step ends the setup with the step, its exit status and the end of its output.
 */
export async function runSetup(spec: SetupSpec, wt: Worktree, run: SetupRun): Promise<SetupResult> {
  const key = spec.cache.length ? await setupCacheKey(wt, spec.commands) : undefined;
  if (key && (await restoreSetupCache(run.workDir, run.repo, key, wt.path, spec.cache))) {
    await writeFile(
      join(run.artifactsDir, SETUP_LOG_FILE),
      `[fleet] setup restored from the cache (${key}).\n`,
    );
    await recordSetupMade(wt, run.artifactsDir);
    return { ok: true, ran: 0, cache: "restored", refused: [] };
  }
  const logPath = join(run.artifactsDir, SETUP_LOG_FILE);
  await writeFile(logPath, "");
  // Bounded as an agent's log is: on a task branch, setup runs what an agent committed.
  const log = createLogSink(logPath);
  const policy = wt.continued ? run.agentNetwork : spec.network;
  const startedAt = Date.now();
  const shell = (await exists("/bin/bash")) ? ["/bin/bash", "-e", "-c"] : ["/bin/sh", "-e", "-c"];
  let refused: RefusedConnection[] = [];
  try {
    for (const [i, command] of spec.commands.entries()) {
      run.log?.(command);
      log.write(`$ ${run.redact(command)}\n`);
      const tail: string[] = [];
      const left = run.timeouts.runMs - (Date.now() - startedAt);
      const { value: end, refused: stepRefused } = await withRunContainment(
        { sandbox: run.sandbox, network: policy, ...optional(run) },
        undefined,
        async ({ network, cgroup }) => {
          const path = setupPath(process.env.PATH);
          const launch = await containedCommand(
            shell[0]!,
            [...shell.slice(1), command],
            { cwd: wt.path, home: run.home, path },
            {
              ...(run.sandbox === "bubblewrap"
                ? {
                    mounts: {
                      writable: [wt.path],
                      readOnly: [wt.cacheDir],
                      readOnlyAfter: [wt.gitDir],
                      hidden: [join(wt.cacheDir, "worktrees")],
                    },
                    alsoReadOnly: await interpreterMounts(process.execPath, run.forbidden ?? []),
                  }
                : {}),
              ...(network ? { network } : {}),
              ...(cgroup ? { cgroup } : {}),
              ...(run.forbidden ? { forbidden: run.forbidden } : {}),
              ...(run.limits ? { tmpfsBytes: run.limits.memoryMb * 1024 * 1024 } : {}),
            },
          );
          if ("spawnError" in launch)
            return { reason: "spawn-error" as const, code: null, detail: launch.spawnError };
          const ended = await superviseProcess({
            ...launch,
            cwd: wt.path,
            env: {
              PATH: path,
              HOME: run.home,
              LANG: "C.UTF-8",
              TMPDIR: "/tmp",
              CI: "true",
              ...network?.env,
            },
            stdin: "ignore",
            timeoutMs: Math.max(1000, left),
            stallMs: run.timeouts.stallMs,
            ...(run.signal ? { signal: run.signal } : {}),
            onLine: (line) => {
              const clean = run.redact(line);
              log.write(`${clean}\n`);
              tail.push(
                clean.length > TAIL_LINE_CHARS
                  ? `${clean.slice(0, TAIL_LINE_CHARS)}… (${clean.length.toLocaleString("en-US")} characters)`
                  : clean,
              );
              if (tail.length > TAIL_LINES) tail.shift();
            },
            onSpawn: () => {},
            ...(cgroup ? { overLimit: async () => (await cgroup.hit()) !== undefined } : {}),
          });
          const hit = await cgroup?.hit();
          return { ...ended, ...(hit ? { hit } : {}) };
        },
      );
      refused = [...refused, ...stepRefused];
      if (end.reason === "exited" && end.code === 0) continue;
      const reason = stepFailure(i, command, end, run);
      log.write(`[fleet] ${reason}\n`);
      return {
        ok: false,
        reason: `${reason}\n\nThe end of its output (the whole of it: \`setup.log\` in the task's artifacts):\n\n${tail.join("\n") || "(no output)"}`,
        refused,
      };
    }
  } finally {
    await log.end();
  }
  await recordSetupMade(wt, run.artifactsDir);
  const saved =
    key && !wt.continued ? await saveSetupCache(run.workDir, run.repo, key, wt.path, spec.cache) : false;
  return { ok: true, ran: spec.commands.length, ...(saved ? { cache: "saved" as const } : {}), refused };
}

function optional(run: SetupRun) {
  return {
    ...(run.limits ? { limits: run.limits } : {}),
    ...(run.egressHosts ? { egressHosts: run.egressHosts } : {}),
  };
}

/** Setup finds the worker's own node (and its npm) first, whatever else PATH holds. */
function setupPath(path: string | undefined): string {
  const own = join(process.execPath, "..");
  return [own, ...(path ?? "/usr/local/bin:/usr/bin:/bin").split(":").filter((p) => p && p !== own)].join(
    ":",
  );
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

function stepFailure(
  i: number,
  command: string,
  end: {
    reason: RunAgentReason | "exited" | "reported";
    code: number | null;
    hit?: "memory" | "pids";
    detail?: string;
  },
  run: SetupRun,
): string {
  const step = `Setup step ${i + 1} (\`${run.redact(command).slice(0, 200)}\`)`;
  if (end.hit && run.limits) return `${step} failed: ${limitHitReason(end.hit, run.limits)}`;
  switch (end.reason) {
    case "timeout":
      return `${step} was stopped: setup ran longer than the run's ${Math.round(run.timeouts.runMs / 60_000)} minutes (timeouts.run_minutes).`;
    case "stall":
      return `${step} was stopped: no output for ${Math.round(run.timeouts.stallMs / 60_000)} minutes (timeouts.stall_minutes).`;
    case "cancelled":
      return `${step} was cancelled.`;
    case "spawn-error":
      return `${step} could not start: ${end.detail ?? "no shell"}.`;
    default:
      return `${step} failed with exit status ${end.code ?? "unknown"}.`;
  }
}

/**
 * What setup made, so that it is never part of the agent's change: every path it created (untracked
 * or ignored) goes into an excludes file Fleet's git reads (`core.excludesFile`, see `gitIn`), and the
 * tracked files it changed are kept at their post-setup content so a commit leaves them out unless the
 * agent changed them further (`unstageSetupChanges`).
 */
export async function recordSetupMade(wt: Worktree, artifactsDir: string): Promise<void> {
  const { stdout } = await gitIn(wt, [
    "status",
    "--porcelain=v1",
    "-z",
    "--ignored=traditional",
    "--untracked-files=normal",
    "--ignore-submodules=all",
  ]);
  const excludes: string[] = [];
  const changed: string[] = [];
  for (const entry of stdout.split("\0")) {
    if (entry.length < 4) continue;
    const code = entry.slice(0, 2);
    const path = entry.slice(3);
    if (code === "??" || code === "!!") excludes.push(`/${escapeGlob(path)}`);
    else if (code !== "  ") changed.push(path);
  }
  const file = join(artifactsDir, "setup-excludes");
  await writeFile(file, excludes.length ? `${excludes.join("\n")}\n` : "");
  wt.excludesFile = file;
  if (changed.length) {
    const ids = await contentIdsOf(wt, changed);
    wt.setupChanged = new Map(changed.map((p, i) => [p, ids[i] ?? ""]));
  }
}

/** A path as a gitignore pattern that matches it alone. */
function escapeGlob(path: string): string {
  return (
    path
      .replace(/[\\*?[\]!#]/g, (c) => `\\${c}`)
      // A pattern is one line: a line break in a name matches as any one character.
      .replace(/[\r\n]/g, "?")
      // Leading and trailing blanks are taken from a pattern unless escaped.
      .replace(/^([ \t])/, "\\$1")
      .replace(/([ \t])$/, "\\$1")
  );
}
