import { isIP } from "node:net";
import type { AgentAdapter, AgentInvocation } from "../../agents/types.ts";
import { type NetworkPolicy, normalizeHost, type RefusedConnection } from "../../core/network-policy.ts";
import type { ResourceLimits } from "../../core/resource-limits.ts";
import type { SandboxMode, SandboxMounts } from "./bubblewrap.ts";
import { openRunCgroup, type RunCgroup } from "./cgroup-limits.ts";
import type { GatewayRun } from "./gateway-run.ts";
import type { ModelGateway } from "./model-gateway.ts";
import { openSandboxNetwork, type SandboxNetwork } from "./network.ts";
import { type RunAgentOptions, type RunAgentResult, runAgent } from "./run-agent.ts";

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
  /** What the sandbox may reach (default: the proxy with the registries); `sandbox: none` has the host's. */
  network?: NetworkPolicy;
  /** Names the operator mapped to addresses for the egress proxy (FLEET_EGRESS_HOSTS). */
  egressHosts?: Readonly<Record<string, string>>;
  /** The run's resource limits, enforced where the worker has cgroups. */
  limits?: ResourceLimits;
  /** Folders never shown to the agent, nor any folder holding one. */
  forbidden?: readonly string[];
}

/**
 * A CLI that talks to its model itself (it takes no base URL, or has no credential for the gateway to
 * hold) reaches the model's host through the egress proxy, whatever the policy allows besides (with
 * `none`, nothing else). An address the operator configured (a scripted model on loopback, say) is
 * reached as given.
 */
function reachingModelDirectly(c: RunContainment, modelUrl: string | undefined): RunContainment {
  if (!c.network || c.network.mode === "host" || !modelUrl) return c;
  let url: URL;
  try {
    url = new URL(modelUrl);
  } catch {
    return c;
  }
  const host = normalizeHost(url.hostname);
  const port = Number(url.port) || (url.protocol === "https:" ? 443 : 80);
  const allow = [...(c.network.mode === "proxy" ? c.network.allow : []), { host, ports: [port] }];
  return {
    ...c,
    network: { mode: "proxy", allow },
    ...(isIP(host) ? { egressHosts: { ...c.egressHosts, [host]: host } } : {}),
  };
}

/** A contained run's result, with the connections its egress proxy refused. */
export type ContainedRunResult = RunAgentResult & { refused: RefusedConnection[] };

/**
 * The network and cgroup of one contained process (an agent, a setup step), opened for it and
 * closed after it whatever happens: `sandbox: none` has neither network namespace nor proxy.
 */
export async function withRunContainment<T>(
  c: Pick<RunContainment, "sandbox" | "network" | "egressHosts" | "limits">,
  gatewayPort: number | undefined,
  run: (parts: { network?: SandboxNetwork; cgroup?: RunCgroup }) => Promise<T>,
): Promise<{ value: T; refused: RefusedConnection[] }> {
  const cgroup = c.limits ? await openRunCgroup(c.limits) : undefined;
  let network: SandboxNetwork | undefined;
  try {
    if (c.sandbox === "bubblewrap" && c.network)
      network = await openSandboxNetwork({
        policy: c.network,
        ...(gatewayPort !== undefined ? { gatewayPort } : {}),
        ...(c.egressHosts ? { egressHosts: c.egressHosts } : {}),
      });
    const value = await run({ ...(network ? { network } : {}), ...(cgroup ? { cgroup } : {}) });
    return { value, refused: network?.refused() ?? [] };
  } finally {
    await network?.close();
    await cgroup?.close();
  }
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
): Promise<ContainedRunResult> {
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
  const viaGateway = run.modelBaseUrl !== undefined && run.modelBaseUrl === containment.gateway?.url;
  try {
    const { value, refused } = await withRunContainment(
      viaGateway ? containment : reachingModelDirectly(containment, run.modelBaseUrl ?? adapter.upstream),
      viaGateway ? Number(new URL(containment.gateway!.url).port) : undefined,
      ({ network, cgroup }) =>
        runAgent(
          adapter,
          {
            ...run,
            // Inside a network of its own the agent reaches the gateway through its forwarder.
            ...(network?.gatewayUrl && viaGateway ? { modelBaseUrl: network.gatewayUrl } : {}),
            network: network?.policy.mode ?? "host",
          },
          {
            ...opts,
            ...(containment.sandbox === "bubblewrap" ? { sandbox: containment.mounts } : {}),
            ...(network ? { network } : {}),
            ...(cgroup ? { cgroup } : {}),
            ...(containment.forbidden ? { forbidden: containment.forbidden } : {}),
            ...(containment.limits ? { tmpfsBytes: containment.limits.memoryMb * 1024 * 1024 } : {}),
          },
        ),
    );
    return { ...value, refused };
  } finally {
    revoke?.();
  }
}
