import { spawnSync } from "node:child_process";
import { nodeFlagsFor, nodeFlagsVariable } from "../../../scripts/node-flags.mjs";
import { type CheckResult, type NodeFlagsProbe, nodeFlagsCheck } from "../../core/doctor.ts";

/**
 * The node flags `fleet serve` or `fleet run` would start with here, judged as bin/fleet.js would at
 * their start: the variable read (FLEET_SERVE_NODE_FLAGS, FLEET_RUN_NODE_FLAGS), given flags tried on
 * this node, and whether this node can start itself again with them.
 */
export function nodeFlagsProbe(command: "serve" | "run", env: NodeJS.ProcessEnv): NodeFlagsProbe {
  const variable = nodeFlagsVariable(command)!;
  const base = {
    command,
    variable,
    given: env[variable] !== undefined,
    // As bin/fleet.js: without these it runs the command as it is, whatever the variable says.
    restarts: typeof (process as { execve?: unknown }).execve === "function" && process.platform !== "win32",
    node: process.version,
    platform: process.platform,
  };
  let flags: string[];
  try {
    flags = nodeFlagsFor(command, env);
  } catch (error) {
    return base.restarts ? { ...base, error: (error as Error).message } : { ...base, flags: [] };
  }
  if (!base.restarts || !base.given || flags.length === 0) return { ...base, flags };
  const tried = spawnSync(process.execPath, [...flags, "-e", ""], { encoding: "utf8", timeout: 10_000 });
  if (tried.status === 0) return { ...base, flags };
  const timedOut = (tried.error as NodeJS.ErrnoException | undefined)?.code === "ETIMEDOUT";
  const said = timedOut
    ? "node did not exit within 10 s with them (a debugger flag such as --inspect-brk waits for a debugger)"
    : (tried.stderr || tried.error?.message || `exit ${tried.status}`).trim().split("\n")[0]!;
  return { ...base, flags, refused: said };
}

export const nodeFlagsChecks = (command: "serve" | "run", env: NodeJS.ProcessEnv): CheckResult =>
  nodeFlagsCheck(nodeFlagsProbe(command, env));
