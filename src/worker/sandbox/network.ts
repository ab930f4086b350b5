import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer, connect as netConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NetworkPolicy, RefusedConnection } from "../../core/network-policy.ts";
import { type EgressProxy, startEgressProxy } from "./egress-proxy.ts";

/**
 * The network of one sandboxed run. `host`: the host's own (today's behaviour before the policy
 * existed). Otherwise the sandbox gets a network namespace of its own (`--unshare-net`: only
 * loopback), so it reaches no listener of the host and no other machine directly; a forwarder that
 * runs first inside it listens on the sandbox's loopback and passes each connection to a unix socket
 * of Fleet's, mounted read-only: one for the model gateway, one for the egress proxy (`proxy` only).
 */
export interface SandboxNetwork {
  policy: NetworkPolicy;
  /** bwrap arguments: the namespace and the sockets' mount (none for `host`). */
  bwrapArgs: string[];
  /** The command the sandbox runs: the forwarder first, then `file` (unchanged for `host`). */
  wrap(file: string, args: string[]): { file: string; args: string[] };
  /** The model gateway's URL as the agent reaches it (undefined: the host's URL, unchanged). */
  gatewayUrl?: string;
  /** The proxy variables the run's programs read (npm, pip, cargo, go, git, curl, node). */
  env: Record<string, string>;
  refused(): RefusedConnection[];
  close(): Promise<void>;
}

/** Where the sockets are inside the sandbox, and where the forwarder's node is. */
const SOCKETS_INSIDE = "/run/fleet-net";
const NODE_INSIDE = "/run/fleet-node";
/** The ports the forwarder listens on inside (each sandbox has its own loopback, so fixed ones do). */
export const SANDBOX_GATEWAY_PORT = 47_331;
export const SANDBOX_PROXY_PORT = 47_332;

/**
 * The forwarder, run by node inside the sandbox (`node -e`): listens on each route's port of the
 * sandbox's loopback, pipes each connection to the route's unix socket, then runs the command with
 * the same stdio and ends with its exit status.
 */
export const FORWARDER = `"use strict";
const net = require("node:net"), { spawn } = require("node:child_process"), os = require("node:os");
const [spec, file, ...args] = process.argv.slice(1);
const routes = JSON.parse(spec);
let waiting = routes.length;
const servers = routes.map((r) => net.createServer((c) => {
  const u = net.connect(r.socket);
  c.on("error", () => u.destroy()); u.on("error", () => c.destroy());
  c.pipe(u); u.pipe(c);
}).listen(r.port, "127.0.0.1", ready));
if (waiting === 0) start();
function ready() { if (--waiting === 0) start(); }
function start() {
  const child = spawn(file, args, { stdio: "inherit" });
  for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, () => child.kill(s));
  child.on("error", (e) => { process.stderr.write("fleet: " + file + ": " + e.message + "\\n"); process.exit(127); });
  child.on("exit", (code, signal) => {
    for (const s of servers) s.close();
    process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0));
  });
}`;

/** Proxy variables for the clients an agent or a setup step commonly runs. */
function proxyEnv(url: string): Record<string, string> {
  const local = "127.0.0.1,localhost,::1";
  const hostPort = `-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=${SANDBOX_PROXY_PORT} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=${SANDBOX_PROXY_PORT}`;
  return {
    HTTPS_PROXY: url,
    https_proxy: url,
    HTTP_PROXY: url,
    http_proxy: url,
    ALL_PROXY: url,
    NO_PROXY: local,
    no_proxy: local,
    // Node's own fetch and http honour the variables only when asked (Node 22.21 / 24.5 and later).
    NODE_USE_ENV_PROXY: "1",
    // The JVM reads no variable: Maven and Gradle take these.
    MAVEN_OPTS: hostPort,
    GRADLE_OPTS: hostPort,
  };
}

/**
 * Sets up a run's network: for `proxy` its egress proxy, for `proxy` and `none` the sockets the
 * forwarder reaches (the gateway's bridged to its loopback port). Close it when the run ends.
 */
export async function openSandboxNetwork(opts: {
  policy: NetworkPolicy;
  /** The host's model gateway port (127.0.0.1), when the run has one. */
  gatewayPort?: number;
  /** Names the operator mapped to addresses (FLEET_EGRESS_HOSTS). */
  egressHosts?: Readonly<Record<string, string>>;
}): Promise<SandboxNetwork> {
  const { policy } = opts;
  if (policy.mode === "host") {
    return {
      policy,
      bwrapArgs: [],
      wrap: (file, args) => ({ file, args }),
      env: {},
      refused: () => [],
      close: async () => {},
    };
  }
  // A folder of the worker's own (mode 700), outside everything the sandbox can write.
  const dir = await mkdtemp(join(tmpdir(), "fleet-net-"));
  await chmod(dir, 0o700);
  const routes: Array<{ port: number; socket: string }> = [];
  let bridge: { close(): Promise<void> } | undefined;
  let proxy: EgressProxy | undefined;
  try {
    if (opts.gatewayPort !== undefined) {
      bridge = await bridgeToLoopback(join(dir, "gateway.sock"), opts.gatewayPort);
      routes.push({ port: SANDBOX_GATEWAY_PORT, socket: `${SOCKETS_INSIDE}/gateway.sock` });
    }
    if (policy.mode === "proxy") {
      proxy = await startEgressProxy({
        policy,
        socketPath: join(dir, "proxy.sock"),
        ...(opts.egressHosts ? { hosts: opts.egressHosts } : {}),
      });
      routes.push({ port: SANDBOX_PROXY_PORT, socket: `${SOCKETS_INSIDE}/proxy.sock` });
    }
  } catch (error) {
    await bridge?.close();
    await proxy?.close();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const spec = JSON.stringify(routes);
  return {
    policy,
    bwrapArgs: [
      "--unshare-net",
      "--ro-bind",
      dir,
      SOCKETS_INSIDE,
      "--ro-bind",
      process.execPath,
      NODE_INSIDE,
    ],
    wrap: (file, args) => ({ file: NODE_INSIDE, args: ["-e", FORWARDER, spec, file, ...args] }),
    ...(opts.gatewayPort !== undefined ? { gatewayUrl: `http://127.0.0.1:${SANDBOX_GATEWAY_PORT}` } : {}),
    env: proxy ? proxyEnv(`http://127.0.0.1:${SANDBOX_PROXY_PORT}`) : {},
    refused: () => proxy?.refused() ?? [],
    async close() {
      await proxy?.close();
      await bridge?.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Connections one run may hold open to the model gateway at once (a CLI streams a few answers at a
 * time): each costs the worker three descriptors, and the worker's are shared by every task it runs.
 */
export const MAX_GATEWAY_CONNECTIONS = 128;

/** A unix socket whose connections are piped to 127.0.0.1:`port` (the model gateway). */
async function bridgeToLoopback(socketPath: string, port: number): Promise<{ close(): Promise<void> }> {
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = netConnect(port, "127.0.0.1");
    for (const s of [client, upstream]) {
      open.add(s);
      s.once("close", () => open.delete(s));
    }
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.maxConnections = MAX_GATEWAY_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    // The run is over: the connections still open through it end too.
    close() {
      for (const s of open) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
