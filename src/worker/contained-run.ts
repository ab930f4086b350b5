import type { AgentAdapter, AgentInvocation } from "../agents/types.ts";
import type { GatewayRun } from "./gateway-run.ts";
import type { ModelGateway } from "./model-gateway.ts";
import { type RunAgentOptions, type RunAgentResult, runAgent } from "./run-agent.ts";
import type { SandboxMode, SandboxMounts } from "./sandbox.ts";

/** How one agent run is contained: its sandbox, and the gateway that holds its credential. */
export interface RunContainment {
  sandbox: SandboxMode;
  /** What a bubblewrap run sees besides the system folders, its executable's package and its HOME. */
  mounts: SandboxMounts;
  /** Fleet's model gateway. Without one (or for a CLI that takes no base URL) the agent holds its credential. */
  gateway?: ModelGateway;
  /** Told each per-run token handed to the agent, so what leaves the run is checked for it too. */
  onRunToken?: (token: string) => void;
  /** The run's credentials and guard at the gateway: requests are metered, limited and rotated there. */
  gatewayRun?: GatewayRun;
}

/** The variable a configured credential travels in: its own name when the CLI reads it, else the coder's. */
export function credentialVariable(adapter: AgentAdapter, configuredName: string): string {
  return configuredName === adapter.credentialEnv || adapter.credentialAliases?.includes(configuredName)
    ? configuredName
    : adapter.credentialEnv;
}

/**
 * Runs one agent as Fleet contains every run: in its sandbox (unless `sandbox: none` was chosen),
 * and, for a CLI that takes a base URL, pointed at the model gateway with a per-run token that is
 * revoked when the run ends, so the credential itself (`inv.credential`, as configured) never
 * reaches the agent's environment.
 */
export async function runContainedAgent(
  adapter: AgentAdapter,
  inv: AgentInvocation,
  opts: RunAgentOptions,
  containment: RunContainment,
): Promise<RunAgentResult> {
  const { credential, ...rest } = inv;
  const run: AgentInvocation = { ...rest };
  let revoke: (() => void) | undefined;
  if (credential) {
    const name = credentialVariable(adapter, credential.name);
    if (containment.gateway && adapter.upstream) {
      const grant = containment.gateway.grant(
        inv.modelBaseUrl ?? adapter.upstream,
        containment.gatewayRun?.credentials ?? credential.value,
        adapter.modelRoutes,
        containment.gatewayRun?.policy,
      );
      revoke = grant.revoke;
      containment.onRunToken?.(grant.token);
      run.credential = { name, value: grant.token };
      run.modelBaseUrl = containment.gateway.url;
    } else {
      run.credential = { name, value: credential.value };
    }
  }
  try {
    return await runAgent(adapter, run, {
      ...opts,
      ...(containment.sandbox === "bubblewrap" ? { sandbox: containment.mounts } : {}),
    });
  } finally {
    revoke?.();
  }
}
