import { spawnSync } from "node:child_process";
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

/** Where the sockets are inside the sandbox, and where the forwarder's node is (node's forwarder only). */
const SOCKETS_INSIDE = "/run/fleet-net";
const NODE_INSIDE = "/run/fleet-node";
/** The ports the forwarder listens on inside (each sandbox has its own loopback, so fixed ones do). */
export const SANDBOX_GATEWAY_PORT = 47_331;
export const SANDBOX_PROXY_PORT = 47_332;

/**
 * The forwarder, the sandbox's first process: listens on each route's port of the sandbox's loopback,
 * pipes each connection to the route's unix socket (both ways; either side's end half-closes the
 * other), runs the command with the same stdio, passes SIGTERM, SIGINT and SIGHUP on to it, and ends
 * with its exit status (128 + the signal's number when a signal ended it). A route it cannot listen
 * on, or a command that cannot start, ends it with 127 and a line saying why. Arguments: the routes
 * (`port=socket,…`, none: empty), the command's file, its arguments.
 *
 * Two programs keep that contract: perl's (Debian's and Ubuntu's essential perl-base has all it uses;
 * one process, every connection in one loop) starts in a few milliseconds and a few MB; node's costs
 * ~0.1 s of CPU and ~15 MB per sandbox, and serves where the worker has no perl.
 */
export type ForwarderKind = "perl" | "node";

const PERL_FORWARDER = String.raw`# fleet: the sandbox's network forwarder
use strict;
use Socket qw(:DEFAULT IPPROTO_TCP TCP_NODELAY);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use Errno qw(EAGAIN EINTR);
my ($spec, $file, @args) = @ARGV;
sub fail { print STDERR "fleet: $_[0]\n"; exit 127 }
my (%listener, %route);
for (grep { length } split /,/, $spec) {
  my ($port, $path) = split /=/, $_, 2;
  socket(my $l, PF_INET, SOCK_STREAM, 0) or fail("socket: $!");
  setsockopt($l, SOL_SOCKET, SO_REUSEADDR, 1);
  (bind($l, pack_sockaddr_in($port, INADDR_LOOPBACK)) && listen($l, SOMAXCONN))
    or fail("cannot listen on 127.0.0.1:$port: $!");
  # A connection gone between the wait and the accept never blocks the loop.
  fcntl($l, F_SETFL, fcntl($l, F_GETFL, 0) | O_NONBLOCK);
  $listener{fileno $l} = $l;
  $route{fileno $l} = $path;
}
# Set before the command starts, so none of these signals is lost or ends the forwarder alone.
my ($agent, $pending) = (0);
$SIG{$_} = sub { $agent ? kill($_[0], $agent) : ($pending = $_[0]) } for qw(TERM INT HUP);
$agent = fork;
defined $agent or fail("fork: $!");
if (!$agent) {
  close $_ for values %listener;
  # The command gets these signals' own defaults; one that came before (into this copy's $pending) is raised again.
  $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP);
  kill($pending, $$) if $pending;
  exec { $file } $file, @args;
  fail("$file: $!");
}
kill($pending, $agent) if $pending;
# A child's end interrupts the wait below at once; a write to a closed socket is an error, not a signal.
$SIG{CHLD} = sub {};
$SIG{PIPE} = 'IGNORE';
# Every connection, both ends in one loop: by descriptor, its socket, its peer's descriptor, what waits
# to be written to it, whether its reading side has ended and whether its writing side is shut.
my %end;
sub nonblocking { my $fl = fcntl($_[0], F_GETFL, 0); fcntl($_[0], F_SETFL, $fl | O_NONBLOCK) }
sub drop {
  my $e = delete $end{$_[0]} or return;
  my $p = delete $end{$e->{peer}};
  close $e->{sock};
  close $p->{sock} if $p;
}
# At most this much waits for a slow reader before the other side is no longer read (1 MB).
my $HOLD = 1 << 20;
for (;;) {
  while ((my $pid = waitpid(-1, 1)) > 0) {
    exit(($? & 127) ? 128 + ($? & 127) : $? >> 8) if $pid == $agent;
  }
  my ($r, $w) = ('', '');
  vec($r, $_, 1) = 1 for keys %listener;
  for my $fd (keys %end) {
    my $e = $end{$fd};
    vec($r, $fd, 1) = 1 if !$e->{eof} && length($end{$e->{peer}}{out}) < $HOLD;
    vec($w, $fd, 1) = 1 if length $e->{out};
  }
  # A child's end that came just before the wait still ends it within a quarter of a second.
  my $n = select(my $rr = $r, my $wr = $w, undef, 0.25);
  next unless defined $n && $n > 0;
  for my $fd (keys %listener) {
    next unless vec($rr, $fd, 1);
    accept(my $c, $listener{$fd}) or next;
    my $u;
    (socket($u, PF_UNIX, SOCK_STREAM, 0) && connect($u, pack_sockaddr_un($route{$fd}))) or do { close $c; next };
    # As node's sockets: a small write goes out at once, not after the peer's delayed acknowledgement.
    setsockopt($c, IPPROTO_TCP, TCP_NODELAY, 1);
    nonblocking($_) for $c, $u;
    $end{fileno $c} = { sock => $c, peer => fileno $u, out => '', eof => 0 };
    $end{fileno $u} = { sock => $u, peer => fileno $c, out => '', eof => 0 };
  }
  for my $fd (keys %end) {
    my $e = $end{$fd} or next;
    if (vec($wr, $fd, 1) && length $e->{out}) {
      my $k = syswrite($e->{sock}, $e->{out});
      if (defined $k) { substr($e->{out}, 0, $k) = '' }
      elsif ($! != EAGAIN && $! != EINTR) { drop($fd); next }
    }
    if (vec($rr, $fd, 1) && !$e->{eof}) {
      my $k = sysread($e->{sock}, my $buf, 65536);
      if ($k) { $end{$e->{peer}}{out} .= $buf }
      elsif (defined $k) { $e->{eof} = 1 }
      elsif ($! != EAGAIN && $! != EINTR) { drop($fd); next }
    }
  }
  # After every end's reads and writes: a side that ended, all it sent passed on, has the other side's
  # writing shut (a half-close); a connection whose both sides ended and were passed on is closed.
  for my $fd (keys %end) {
    my $e = $end{$fd} or next;
    my $p = $end{$e->{peer}} or next;
    if ($e->{eof} && !length $p->{out} && !$p->{shut}) { shutdown($p->{sock}, 1); $p->{shut} = 1 }
    drop($fd) if $e->{eof} && $p->{eof} && !length $e->{out} && !length $p->{out};
  }
}`;

const NODE_FORWARDER = `"use strict";
const net = require("node:net"), { spawn } = require("node:child_process"), os = require("node:os");
const [spec, file, ...args] = process.argv.slice(1);
let child, pending;
// Set before the command starts, so none of these signals is lost or ends the forwarder alone.
for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, () => (child ? child.kill(s) : (pending = s)));
const routes = spec.split(",").filter(Boolean).map((r) => { const i = r.indexOf("="); return { port: Number(r.slice(0, i)), socket: r.slice(i + 1) }; });
let waiting = routes.length;
const servers = routes.map((r) => net.createServer({ allowHalfOpen: true }, (c) => {
  const u = net.connect({ path: r.socket, allowHalfOpen: true });
  c.on("error", () => u.destroy()); u.on("error", () => c.destroy());
  c.pipe(u); u.pipe(c);
}).listen(r.port, "127.0.0.1", ready).on("error", (e) => {
  process.stderr.write("fleet: cannot listen on 127.0.0.1:" + r.port + ": " + e.message + "\\n"); process.exit(127);
}));
if (waiting === 0) start();
function ready() { if (--waiting === 0) start(); }
function start() {
  child = spawn(file, args, { stdio: "inherit" });
  if (pending) child.kill(pending);
  child.on("error", (e) => { process.stderr.write("fleet: " + file + ": " + e.message + "\\n"); process.exit(127); });
  child.on("exit", (code, signal) => {
    for (const s of servers) s.close();
    process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0));
  });
}`;

/**
 * The command that runs the forwarder of `kind` with `routes`, then `file`: the file and arguments as
 * the sandbox sees them (node's is shown at /run/fleet-node; perl's is the system's).
 */
export function forwarderCommand(
  kind: ForwarderKind,
  routes: ReadonlyArray<{ port: number; socket: string }>,
  file: string,
  args: readonly string[],
  node = NODE_INSIDE,
): { file: string; args: string[] } {
  const spec = routes.map((r) => `${r.port}=${r.socket}`).join(",");
  return kind === "perl"
    ? { file: PERL, args: ["-e", PERL_FORWARDER, spec, file, ...args] }
    : { file: node, args: ["-e", NODE_FORWARDER, spec, file, ...args] };
}

const PERL = "/usr/bin/perl";
let perlChecked: boolean | undefined;

/** perl's forwarder where this machine's perl has what it uses (checked once per process), else node's. */
export function defaultForwarder(): ForwarderKind {
  perlChecked ??= spawnSync(PERL, ["-MSocket", "-e", "1"], { stdio: "ignore", timeout: 10_000 }).status === 0;
  return perlChecked ? "perl" : "node";
}

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
  /** Which forwarder runs inside (default: perl's where the machine has it). */
  forwarder?: ForwarderKind;
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
  const kind = opts.forwarder ?? defaultForwarder();
  return {
    policy,
    bwrapArgs: [
      "--unshare-net",
      "--ro-bind",
      dir,
      SOCKETS_INSIDE,
      ...(kind === "node" ? ["--ro-bind", process.execPath, NODE_INSIDE] : []),
    ],
    wrap: (file, args) => forwarderCommand(kind, routes, file, args),
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
  // Half-open as the forwarder's sockets are: a request's end does not end its answer.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = netConnect({ port, host: "127.0.0.1", allowHalfOpen: true });
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
