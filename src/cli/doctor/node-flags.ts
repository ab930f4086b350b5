import {
  canRestartNode,
  nodeFlagsFor,
  nodeFlagsVariable,
  nodeRefusal,
} from "../../../scripts/node-flags.mjs";
import { type CheckResult, type NodeFlagsProbe, nodeFlagsCheck } from "../../core/doctor.ts";

/**
 * The node flags `fleet serve` or `fleet run` would start with here, judged as bin/fleet.js would at
 * their start (the same functions): the variable read (FLEET_SERVE_NODE_FLAGS, FLEET_RUN_NODE_FLAGS),
 * given flags tried on this node, and whether this node can start itself again with them.
 */
export async function nodeFlagsProbe(
  command: "serve" | "run",
  env: NodeJS.ProcessEnv,
): Promise<NodeFlagsProbe> {
  const variable = nodeFlagsVariable(command)!;
  const base = {
    command,
    variable,
    given: env[variable] !== undefined,
    // Without it bin/fleet.js runs the command as it is, whatever the variable says.
    restarts: canRestartNode(),
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
  const refused = await nodeRefusal(flags, 10_000);
  return refused === undefined ? { ...base, flags } : { ...base, flags, refused };
}

export const nodeFlagsChecks = async (
  command: "serve" | "run",
  env: NodeJS.ProcessEnv,
): Promise<CheckResult> => nodeFlagsCheck(await nodeFlagsProbe(command, env));
