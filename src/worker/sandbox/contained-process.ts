import { realpath } from "node:fs/promises";
import { bubblewrapArgs, executableMounts, resolveExecutable, type SandboxMounts } from "./bubblewrap.ts";
import type { RunCgroup } from "./cgroup-limits.ts";
import type { SandboxNetwork } from "./network.ts";

/** Where and how one process of a run (an agent, a setup step) is contained. */
export interface Containment {
  /** The paths a bubblewrap sandbox shows (its HOME is added writable). Absent: a plain child process. */
  mounts?: SandboxMounts;
  /** The sandbox's network: its namespace, forwarder and proxy (absent: the host's). */
  network?: SandboxNetwork;
  /** The run's cgroup: entered before anything of the run starts. */
  cgroup?: RunCgroup;
  /** Folders never shown, nor any folder holding one (the worker's HOME, Fleet's folders). */
  forbidden?: readonly string[];
  /** Read-only paths the program needs besides its own package (an interpreter of the worker's). */
  alsoReadOnly?: readonly string[];
  /** The private /tmp's size cap, in bytes. */
  tmpfsBytes?: number;
}

/**
 * The file and arguments that start `file` contained: looked up on `path` and shown with what it
 * needs, in bubblewrap with the run's mounts and network (its forwarder first), inside the run's
 * cgroup. Without mounts, the program itself (in the cgroup when there is one).
 */
export async function containedCommand(
  file: string,
  args: readonly string[],
  at: { cwd: string; home: string; path: string },
  c: Containment,
): Promise<{ file: string; args: string[] } | { spawnError: string }> {
  let launch = { file, args: [...args] };
  if (c.mounts) {
    const executable = await resolveExecutable(file, at.path);
    if (!executable) return { spawnError: `${file} was not found on PATH (${at.path})` };
    const forbidden = c.forbidden ?? [];
    const mounts: SandboxMounts = {
      ...c.mounts,
      writable: [...c.mounts.writable, at.home],
      readOnly: [
        ...c.mounts.readOnly,
        ...(await executableMounts(executable, forbidden)),
        ...(c.alsoReadOnly ?? []),
      ],
    };
    const inner = (c.network?.wrap ?? ((f: string, a: string[]) => ({ file: f, args: a })))(
      await realpath(executable),
      [...args],
    );
    const sandbox = await bubblewrapArgs(mounts, at.cwd, {
      forbidden,
      extra: c.network?.bwrapArgs ?? [],
      ...(c.tmpfsBytes ? { tmpfsBytes: c.tmpfsBytes } : {}),
    });
    launch = { file: "bwrap", args: [...sandbox, inner.file, ...inner.args] };
  }
  return c.cgroup ? c.cgroup.enter(launch.file, launch.args) : launch;
}
