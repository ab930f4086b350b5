// Resource limits of one agent run (`limits` in .github/fleet.yml): setup and every agent phase get
// their own, enforced with cgroups where the worker has them.

export interface ResourceLimits {
  /** Memory of every process of the run together (tmpfs files count), in MiB. */
  memoryMb: number;
  /** Processes and threads of the run at once. */
  pids: number;
  /** CPU time per wall-clock second, in cores; undefined: every core. */
  cpus?: number;
}

export const DEFAULT_RESOURCE_LIMITS: ResourceLimits = { memoryMb: 8192, pids: 1024 };

/** The limits of a repository's config (`limits.memory_mb`, `limits.pids`, `limits.cpus`). */
export function resourceLimitsOf(config: {
  limits: { memory_mb: number; pids: number; cpus?: number };
}): ResourceLimits {
  const { memory_mb, pids, cpus } = config.limits;
  return { memoryMb: memory_mb, pids, ...(cpus !== undefined ? { cpus } : {}) };
}

/** Which limit a run reached. */
export type LimitHit = "memory" | "pids";

/** The reason a run that reached a limit ends with, naming the limit and where to raise it. */
export function limitHitReason(hit: LimitHit, limits: ResourceLimits): string {
  return hit === "memory"
    ? `The run reached its memory limit (limits.memory_mb: ${limits.memoryMb} MiB in .github/fleet.yml) and a process of it was killed; the run was stopped.`
    : `The run reached its process limit (limits.pids: ${limits.pids} processes and threads in .github/fleet.yml): it could not start more, and was stopped.`;
}

/** How a worker enforces limits: which cgroup interface, or none and why. */
export type LimitsEnforcement = { kind: "cgroup2" | "cgroup1" } | { kind: "none"; why: string };

/** One line for the tracking comment when limits are not enforced (like `sandbox: none`). */
export function unenforcedLimitsNote(enforcement: LimitsEnforcement): string | undefined {
  return enforcement.kind === "none"
    ? `not enforced on this worker (${enforcement.why}): a run can use all of the machine's memory and processes`
    : undefined;
}
