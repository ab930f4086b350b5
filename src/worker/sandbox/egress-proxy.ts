import { lookup } from "node:dns/promises";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { connect, isIP, type Socket } from "node:net";
import {
  allowedByPolicy,
  type NetworkPolicy,
  normalizeHost,
  type RefusedConnection,
  reachableAddress,
} from "../../core/network-policy.ts";

/**
 * Fleet's egress proxy for one run: the only way out of a sandbox whose network namespace has only
 * loopback. An HTTP proxy (CONNECT for TLS and anything else, absolute-form requests for plain HTTP,
 * as `HTTPS_PROXY` / `HTTP_PROXY` clients speak it) on a unix socket the sandbox reaches through its
 * forwarder. It lets through the hosts and ports of the run's policy, resolves names itself (the
 * sandbox has no DNS), never connects to loopback, link-local (cloud metadata) or unspecified
 * addresses unless the operator mapped a name there, and counts every refusal by host and port.
 */
export interface EgressProxy {
  /** The unix socket it listens on. */
  socketPath: string;
  /** Every refused connection so far, by host and port. */
  refused(): RefusedConnection[];
  close(): Promise<void>;
}

export interface EgressProxyOptions {
  policy: NetworkPolicy;
  socketPath: string;
  /**
   * Names the operator maps to addresses (`FLEET_EGRESS_HOSTS=name=address,...`): used instead of DNS,
   * and such an address is reached even when it is a loopback one (a mirror on the worker's machine).
   */
  hosts?: Readonly<Record<string, string>>;
  /** How long a connection to an allowed host may take to open. */
  connectTimeoutMs?: number;
}

/** `FLEET_EGRESS_HOSTS` ("registry.internal=10.0.0.5,mirror.test=127.0.0.1") as a map; bad pairs are an error. */
export function parseEgressHosts(text: string | undefined): Record<string, string> {
  const hosts: Record<string, string> = {};
  for (const pair of (text ?? "").split(",")) {
    if (!pair.trim()) continue;
    const [name, address, ...rest] = pair.split("=");
    if (!name?.trim() || !address || rest.length > 0 || isIP(address.trim()) === 0)
      throw new Error(
        `FLEET_EGRESS_HOSTS: "${pair}" is not name=address (an IPv4 or IPv6 address), e.g. registry.internal=10.0.0.5`,
      );
    hosts[normalizeHost(name)] = address.trim();
  }
  return hosts;
}

/** Distinct refused hosts and ports kept per run; later ones are counted in one "(other hosts)" row (port 0) per reason. */
const MAX_REFUSAL_ROWS = 100;
/**
 * Connections one run may hold open to its proxy at once (package managers use a few dozen): each
 * costs the worker a descriptor or two, and the worker's are shared by every task it runs.
 */
export const MAX_PROXY_CONNECTIONS = 256;

type Target = { address: string } | { refused: RefusedConnection["why"] };

export async function startEgressProxy(opts: EgressProxyOptions): Promise<EgressProxy> {
  const proxy = proxyState(opts);
  const server = createServer((req, res) => void forwardPlain(proxy, req, res));
  server.maxConnections = MAX_PROXY_CONNECTIONS;
  server.on("connection", (s) => proxy.track(s));
  server.on(
    "connect",
    (req: IncomingMessage, client: Socket, head: Buffer) => void tunnel(proxy, req, client, head),
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.socketPath, () => resolve());
  });
  return {
    socketPath: opts.socketPath,
    refused: () => [...proxy.tally.values()].map((r) => ({ ...r })),
    async close() {
      for (const s of proxy.sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What one proxy keeps: its policy's checks, the refusals so far and the sockets to close. */
function proxyState(opts: EgressProxyOptions) {
  const tally = new Map<string, RefusedConnection>();
  const sockets = new Set<Socket>();
  return {
    opts,
    tally,
    sockets,
    track(s: Socket) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    },
    refuse(rawHost: string, rawPort: number, why: RefusedConnection["why"]) {
      // The agent names the host: what is recorded (and later published in the report) is bounded.
      const named = /^[a-z0-9.:_-]{1,253}$/.test(rawHost) ? rawHost : "(not a host name)";
      // Past the cap, neither a new host nor a new port adds a row.
      const full = tally.size >= MAX_REFUSAL_ROWS && !tally.has(`${named}:${rawPort}:${why}`);
      const host = full ? "(other hosts)" : named;
      const port = full ? 0 : rawPort;
      const key = `${host}:${port}:${why}`;
      const seen = tally.get(key);
      tally.set(key, seen ? { ...seen, count: seen.count + 1 } : { host, port, count: 1, why });
    },
    /** Where a connection to host:port goes, or why it does not. */
    async target(rawHost: string, port: number): Promise<Target> {
      const host = normalizeHost(rawHost);
      if (!allowedByPolicy(opts.policy, host, port)) return { refused: "not allowed" };
      const mapped = opts.hosts?.[host];
      if (mapped) return { address: mapped };
      if (isIP(host)) return reachableAddress(host) ? { address: host } : { refused: "address refused" };
      let addresses: Array<{ address: string }>;
      try {
        addresses = await lookup(host, { all: true });
      } catch {
        return { refused: "no such host" };
      }
      const usable = addresses.find((a) => reachableAddress(a.address));
      return usable ? { address: usable.address } : { refused: "address refused" };
    },
  };
}
type ProxyState = ReturnType<typeof proxyState>;

/** CONNECT host:port: a TCP tunnel to an allowed host. */
async function tunnel(proxy: ProxyState, req: IncomingMessage, client: Socket, head: Buffer) {
  client.on("error", () => client.destroy());
  const at = parseAuthority(req.url ?? "");
  if (!at) {
    client.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    return;
  }
  const target = await proxy.target(at.host, at.port);
  if ("refused" in target) {
    proxy.refuse(normalizeHost(at.host), at.port, target.refused);
    client.end(refusalHead(at.host, at.port, target.refused));
    return;
  }
  const upstream = connect({
    host: target.address,
    port: at.port,
    timeout: proxy.opts.connectTimeoutMs ?? 30_000,
  });
  proxy.track(upstream);
  upstream.once("timeout", () => upstream.destroy(new Error("connect timeout")));
  upstream.once("connect", () => {
    upstream.setTimeout(0);
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on("error", (e) => {
    if (client.writable && !upstream.readable)
      client.end(`HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n${e.message}\n`);
    else client.destroy();
  });
  client.once("close", () => upstream.destroy());
}

/** `GET http://host/path`: a plain HTTP request to an allowed host, passed on with its body. */
async function forwardPlain(proxy: ProxyState, req: IncomingMessage, res: ServerResponse) {
  let url: URL;
  try {
    url = new URL(req.url ?? "");
    if (url.protocol !== "http:") throw new Error("not http");
  } catch {
    res
      .writeHead(400, { "content-type": "text/plain" })
      .end("Fleet's egress proxy takes absolute http:// URLs and CONNECT.\n");
    return;
  }
  const port = url.port ? Number(url.port) : 80;
  const target = await proxy.target(url.hostname, port);
  if ("refused" in target) {
    proxy.refuse(normalizeHost(url.hostname), port, target.refused);
    res.writeHead(403, { "content-type": "text/plain", "x-fleet-refused": `${url.hostname}:${port}` });
    res.end(refusalText(url.hostname, port, target.refused));
    return;
  }
  const headers: Record<string, string | string[] | undefined> = { ...req.headers, host: url.host };
  delete headers["proxy-connection"];
  delete headers["proxy-authorization"];
  const out = httpRequest(
    { host: target.address, port, method: req.method, path: `${url.pathname}${url.search}`, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  // The client went away (or the run ended) before the answer did: the upstream connection goes too.
  res.once("close", () => {
    if (!res.writableFinished) out.destroy();
  });
  out.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`${e.message}\n`);
  });
  req.pipe(out);
}

/** `host:port` or `[v6]:port` of a CONNECT request. */
function parseAuthority(text: string): { host: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:\s]+):(\d+)$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[2]);
  return port >= 1 && port <= 65_535 ? { host: m[1]!, port } : undefined;
}

function refusalText(host: string, port: number, why: RefusedConnection["why"]): string {
  const reason =
    why === "not allowed"
      ? "it is not in the task's network allowlist (network.allow in .github/fleet.yml)"
      : why === "no such host"
        ? "the name does not resolve"
        : "it resolves to an address agents never reach (loopback, link-local or metadata)";
  return `Fleet's egress proxy refused ${host}:${port}: ${reason}.\n`;
}

function refusalHead(host: string, port: number, why: RefusedConnection["why"]): string {
  const body = refusalText(host, port, why);
  return `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Fleet-Refused: ${host}:${port}\r\nConnection: close\r\n\r\n${body}`;
}
