import { z } from "zod";

// What an agent run may reach on the network (`network` and `setup_network` in .github/fleet.yml):
// `proxy` (the default): a network namespace of its own with only loopback, the model through Fleet's
// gateway, and other hosts only through Fleet's egress proxy, which allows the package registries
// below and what `network.allow` adds; `none`: the model only; `host`: the host's network as it is.

export const NETWORK_MODES = ["proxy", "none", "host"] as const;
export type NetworkMode = (typeof NETWORK_MODES)[number];

/** A host name (or `*.` wildcard, or an IP literal) and the ports allowed on it. */
export interface AllowedHost {
  /** Lower case; `*.example.com` matches every name below example.com (not example.com itself). */
  host: string;
  ports: readonly number[];
}

/** What one run's network is: its mode, and for `proxy` the hosts the egress proxy lets through. */
export interface NetworkPolicy {
  mode: NetworkMode;
  allow: readonly AllowedHost[];
}

/** Ports an entry without one allows: HTTPS and plain HTTP. */
export const DEFAULT_PORTS: readonly number[] = [443, 80];

/**
 * The package registries of common ecosystems, allowed by default (`registries: false` leaves them
 * out). HTTPS only: each serves its packages over TLS.
 */
export const REGISTRY_HOSTS: Readonly<Record<string, readonly string[]>> = {
  npm: ["registry.npmjs.org", "registry.yarnpkg.com"],
  PyPI: ["pypi.org", "files.pythonhosted.org"],
  crates: ["crates.io", "index.crates.io", "static.crates.io"],
  "Go modules": ["proxy.golang.org", "sum.golang.org"],
  Maven: ["repo.maven.apache.org", "repo1.maven.org"],
  RubyGems: ["rubygems.org", "index.rubygems.org"],
};

const HOST_NAME = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/**
 * One `network.allow` entry: `host`, `host:port`, `*.host`, an IPv4 literal, or `[v6]:port`.
 * Returns the entry, or a message saying what is wrong with it.
 */
export function parseAllowEntry(text: string): AllowedHost | string {
  const entry = text.trim().toLowerCase();
  let host = entry;
  let port: number | undefined;
  const v6 = /^\[([0-9a-f:.]+)\](?::(\d+))?$/.exec(entry);
  if (v6) {
    host = v6[1]!;
    port = v6[2] === undefined ? undefined : Number(v6[2]);
  } else {
    const at = entry.lastIndexOf(":");
    if (at > 0 && /^\d+$/.test(entry.slice(at + 1))) {
      host = entry.slice(0, at);
      port = Number(entry.slice(at + 1));
    }
  }
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65_535))
    return `"${text}": the port must be a number from 1 to 65535`;
  if (!v6 && !IPV4.test(host) && !HOST_NAME.test(host))
    return `"${text}" is not a host name (e.g. registry.example.com, registry.example.com:8443, *.example.com)`;
  return { host, ports: port === undefined ? DEFAULT_PORTS : [port] };
}

const allowEntry = z.string().superRefine((s, ctx) => {
  const parsed = parseAllowEntry(s);
  if (typeof parsed === "string") ctx.addIssue({ code: "custom", message: parsed });
});

/** `network` as the file writes it: a mode, or `{ allow, registries }` (the proxy with more hosts). */
export const NETWORK_SCHEMA = z.union([
  z.enum(NETWORK_MODES),
  z.strictObject({
    allow: z.array(allowEntry).max(500).default([]),
    /** The registries of REGISTRY_HOSTS (default true). */
    registries: z.boolean().default(true),
  }),
]);
export type NetworkSetting = z.infer<typeof NETWORK_SCHEMA>;

export const NETWORK_FORM =
  'one of: proxy, none, host, or { allow: [host, "host:port", "*.host", ...], registries: true|false }';

/** The policy a setting stands for (the registries included unless the setting leaves them out). */
export function networkPolicyOf(setting: NetworkSetting | undefined): NetworkPolicy {
  if (setting === "none" || setting === "host") return { mode: setting, allow: [] };
  const registries = typeof setting === "object" ? setting.registries : true;
  const extra = typeof setting === "object" ? setting.allow : [];
  const allow: AllowedHost[] = registries
    ? Object.values(REGISTRY_HOSTS)
        .flat()
        .map((host) => ({ host, ports: [443] }))
    : [];
  for (const text of extra) {
    const parsed = parseAllowEntry(text);
    if (typeof parsed !== "string") allow.push(parsed);
  }
  return { mode: "proxy", allow };
}

/** Whether the policy's proxy lets a connection to `host`:`port` through. */
export function allowedByPolicy(policy: NetworkPolicy, host: string, port: number): boolean {
  if (policy.mode === "host") return true;
  if (policy.mode === "none") return false;
  const name = normalizeHost(host);
  return policy.allow.some((a) => a.ports.includes(port) && hostMatches(a.host, name));
}

function hostMatches(pattern: string, name: string): boolean {
  if (pattern.startsWith("*.")) return name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1;
  return pattern === name;
}

/** A host as a client names it: lower case, no trailing dot, no IPv6 brackets. */
export function normalizeHost(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/\.$/, "")
    .replace(/^\[(.*)\]$/, "$1");
}

/**
 * Whether an address the proxy resolved a name to may be connected to: never the host's own loopback,
 * a link-local address (the cloud metadata service, 169.254.169.254 and fd00:ec2::254), another
 * cloud's metadata service (Alibaba's 100.100.100.200, Azure's WireServer 168.63.129.16), the
 * unspecified or a multicast address, in any spelling (an IPv4-mapped IPv6 address is its IPv4 one).
 * An allowed name that resolves to one of these is refused: a name is allowed, not whatever its DNS
 * says today. (The operator maps a name to such an address explicitly, e.g. a registry mirror on the
 * worker's machine: `FLEET_EGRESS_HOSTS`.) Anything that is not an address is refused too.
 */
export function reachableAddress(address: string): boolean {
  if (IPV4.test(address)) return reachableV4(address);
  const g = ipv6Groups(address);
  if (!g) return false;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  // ::ffff:a.b.c.d, however written: the IPv4 address it stands for.
  if (zeros(0, 5) && g[5] === 0xffff)
    return reachableV4(`${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`);
  if (zeros(0, 7) && (g[7] === 0 || g[7] === 1)) return false; // :: and ::1
  if ((g[0]! & 0xffc0) === 0xfe80) return false; // fe80::/10 link-local
  if ((g[0]! & 0xff00) === 0xff00) return false; // multicast
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && zeros(2, 7) && g[7] === 0x254) return false; // AWS's metadata
  return true;
}

/** Other clouds' metadata services, which are not link-local. */
const METADATA_V4 = new Set(["100.100.100.200", "168.63.129.16"]);

function reachableV4(v4: string): boolean {
  const [x, y] = v4.split(".").map(Number) as [number, number];
  if (x === 127 || x === 0 || x >= 224) return false;
  if (x === 169 && y === 254) return false;
  return !METADATA_V4.has(v4);
}

/** The eight 16-bit groups of an IPv6 address in any spelling (`::`, an IPv4 tail), or undefined. */
function ipv6Groups(text: string): number[] | undefined {
  let s = text.toLowerCase();
  const tail = /:(\d+\.\d+\.\d+\.\d+)$/.exec(s)?.[1];
  if (tail) {
    if (!IPV4.test(tail)) return undefined;
    const [a, b, c, d] = tail.split(".").map(Number) as [number, number, number, number];
    s = `${s.slice(0, -tail.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const part = (h: string) => (h === "" ? [] : h.split(":"));
  const head = part(halves[0]!);
  const rest = halves.length === 2 ? part(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  if (!groups.every((x) => /^[0-9a-f]{1,4}$/.test(x))) return undefined;
  return groups.map((x) => Number.parseInt(x, 16));
}

/** One host and port the egress proxy refused during a run, and how often. */
export interface RefusedConnection {
  host: string;
  port: number;
  count: number;
  /** Why: not allowed by the policy, or the name resolved to an address that is never reached. */
  why: "not allowed" | "address refused" | "no such host";
}

/** Refusals of several runs (setup, plan, work) as one list: the same host and port added up. */
export function mergeRefusals(...lists: ReadonlyArray<readonly RefusedConnection[] | undefined>) {
  const byKey = new Map<string, RefusedConnection>();
  for (const list of lists)
    for (const r of list ?? []) {
      const key = `${r.host}:${r.port}:${r.why}`;
      const seen = byKey.get(key);
      byKey.set(key, seen ? { ...seen, count: seen.count + r.count } : { ...r });
    }
  return [...byKey.values()].sort((a, b) => b.count - a.count || a.host.localeCompare(b.host));
}
