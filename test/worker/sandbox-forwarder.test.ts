// The sandbox's network forwarder, both programs that keep its contract (perl's, node's): run as a run
// runs it, first in a bubblewrap sandbox with only loopback, it bridges a port of the sandbox's loopback
// to a unix socket of the worker both ways (large bodies, a half-close), runs the command with its
// stdio, passes its exit status and signals, and fails with 127 and a reason when it cannot.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { networkPolicyOf } from "../../src/core/network-policy.ts";
import {
  defaultForwarder,
  type ForwarderKind,
  forwarderCommand,
  openSandboxNetwork,
  SANDBOX_GATEWAY_PORT,
} from "../../src/worker/sandbox/network.ts";

let dir: string;
/** The worker's side: reads a request to its end, then answers its length and hash, then 1 MB. */
let upstream: Server;
let socket: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleet-forwarder-"));
  socket = join(dir, "upstream.sock");
  upstream = createServer(answerOnEnd);
  await new Promise<void>((resolve) => upstream.listen(socket, resolve));
});

afterAll(async () => {
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

/** Reads a request to its end, then answers its length and hash, then 1 MB. */
function answerOnEnd(c: Socket) {
  const hash = createHash("sha256");
  let bytes = 0;
  c.on("data", (d: Buffer) => {
    bytes += d.length;
    hash.update(d);
  });
  // The sandbox's side half-closed: the answer still goes back on the same connection.
  c.on("end", () => {
    c.write(`${bytes} ${hash.digest("hex")}\n`);
    c.end(Buffer.alloc(1024 * 1024, 97));
  });
  c.on("error", () => {});
}

/** Runs `file args` through the forwarder (in a sandbox of its own network when `sandboxed`). */
function forward(
  kind: ForwarderKind,
  routes: Array<{ port: number; socket: string }>,
  file: string,
  args: string[],
  opts: { sandboxed?: boolean } = {},
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  const command = forwarderCommand(kind, routes, file, args, process.execPath);
  const [bin, argv] = opts.sandboxed
    ? [
        "bwrap",
        [
          ...["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"],
          ...["--unshare-net", "--unshare-pid", "--die-with-parent", command.file, ...command.args],
        ],
      ]
    : [command.file, command.args];
  const child = spawn(bin, argv, { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  return new Promise((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
}

/** Inside the sandbox: sends 3 MB to the port, half-closes, prints what came back (first line, size). */
const CLIENT = `"use strict";
const net = require("node:net"), crypto = require("node:crypto");
const body = crypto.randomBytes(3 * 1024 * 1024);
const c = net.connect(Number(process.argv[1]), "127.0.0.1", () => c.end(body));
const parts = [];
c.on("data", (d) => parts.push(d));
c.on("end", () => {
  const all = Buffer.concat(parts), nl = all.indexOf(10);
  const sent = body.length + " " + crypto.createHash("sha256").update(body).digest("hex");
  console.log(JSON.stringify({ echoedSent: all.subarray(0, nl).toString() === sent, rest: all.length - nl - 1 }));
});
c.on("error", (e) => { console.error(e.message); process.exit(3); });`;

const kinds: ForwarderKind[] = ["perl", "node"];

describe.each(kinds)("the %s forwarder", (kind) => {
  it("bridges the sandbox's loopback port to the worker's socket both ways, a half-close included", async () => {
    const r = await forward(kind, [{ port: 47_331, socket }], process.execPath, ["-e", CLIENT, "47331"], {
      sandboxed: true,
    });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ echoedSent: true, rest: 1024 * 1024 });
  }, 30_000);

  it("through the worker's own bridge to the model gateway, a request's half-close keeps its answer", async () => {
    // The gateway's stand-in on the host's loopback: answers once the request has ended.
    const gateway = createServer(answerOnEnd);
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    const network = await openSandboxNetwork({
      policy: networkPolicyOf("none"),
      gatewayPort: (gateway.address() as AddressInfo).port,
      forwarder: kind,
    });
    try {
      const inner = network.wrap(process.execPath, ["-e", CLIENT, String(SANDBOX_GATEWAY_PORT)]);
      const child = spawn(
        "bwrap",
        [
          ...["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"],
          ...["--unshare-pid", "--die-with-parent", ...network.bwrapArgs, inner.file, ...inner.args],
        ],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
      });
      expect(await new Promise((resolve) => child.once("close", resolve))).toBe(0);
      expect(JSON.parse(out)).toEqual({ echoedSent: true, rest: 1024 * 1024 });
    } finally {
      await network.close();
      await new Promise<void>((resolve) => gateway.close(() => resolve()));
    }
  }, 30_000);

  it("bridges every route, each to its own socket, for connections at once", async () => {
    const script = `"use strict";
const net = require("node:net");
const one = (port) => new Promise((resolve, reject) => {
  const c = net.connect(port, "127.0.0.1", () => c.end("x".repeat(1000)));
  let n = 0; c.on("data", (d) => { n += d.length; }); c.on("end", () => resolve(n)); c.on("error", reject);
});
Promise.all([47331, 47332, 47331, 47332].map(one)).then((ns) => console.log(ns.join(",")));`;
    const r = await forward(
      kind,
      [
        { port: 47_331, socket },
        { port: 47_332, socket },
      ],
      process.execPath,
      ["-e", script],
      { sandboxed: true },
    );
    expect(r.code).toBe(0);
    const each = `1000 ${createHash("sha256").update("x".repeat(1000)).digest("hex")}\n`.length + 1024 * 1024;
    expect(r.stdout.trim()).toBe([each, each, each, each].join(","));
  }, 30_000);

  it("runs the command with its stdio and ends with its exit status, 128 + the signal when one ended it", async () => {
    const ok = await forward(kind, [], "/bin/sh", ["-c", 'echo "out $0"; echo err >&2; exit 7', "arg0"]);
    expect(ok).toMatchObject({ code: 7, stdout: "out arg0\n", stderr: "err\n" });
    const killed = await forward(kind, [], "/bin/sh", ["-c", "kill -KILL $$"]);
    expect(killed.code).toBe(137);
  }, 30_000);

  it("passes SIGTERM on to the command", async () => {
    const command = forwarderCommand(
      kind,
      [],
      "/bin/sh",
      ["-c", 'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.05; done'],
      process.execPath,
    );
    // A group of its own: whatever happens, nothing of it outlives the test.
    const child = spawn(command.file, command.args, { stdio: ["ignore", "pipe", "inherit"], detached: true });
    let out = "";
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
    try {
      // Once the command's trap is set, the forwarder alone is signalled.
      await new Promise<void>((resolve) =>
        child.stdout.on("data", (d) => {
          out += d;
          if (out.includes("ready")) resolve();
        }),
      );
      child.kill("SIGTERM");
      expect(await exited).toBe(42);
    } finally {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await closed;
    expect(out).toContain("got-term");
  }, 30_000);

  it("ends with 127 and the reason when the command cannot start or a port cannot be listened on", async () => {
    const missing = await forward(kind, [], "/nonexistent/agent", []);
    expect(missing.code).toBe(127);
    expect(missing.stderr).toMatch(/^fleet: .*\/nonexistent\/agent/);
    const twice = await forward(
      kind,
      [
        { port: 47_333, socket },
        { port: 47_333, socket },
      ],
      "/bin/true",
      [],
      { sandboxed: true },
    );
    expect(twice.code).toBe(127);
    expect(twice.stderr).toMatch(/fleet: cannot listen on 127\.0\.0\.1:47333/);
  }, 30_000);
});

it("perl's is the default where the machine's perl has what it uses", () => {
  // Debian and Ubuntu (this project's images and CI) have perl-base.
  expect(defaultForwarder()).toBe("perl");
});
