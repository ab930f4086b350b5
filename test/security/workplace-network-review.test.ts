// What a hostile agent can make the worker hold through its sandbox's network: the egress proxy and
// the model gateway's bridge live in the worker's process, so every connection an agent opens through
// them costs the worker descriptors (shared by every task it runs), and every host it names is a row
// the worker keeps. Real sockets, a real proxy, a real bridge.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { networkPolicyOf, reachableAddress } from "../../src/core/network-policy.ts";
import { MAX_PROXY_CONNECTIONS, startEgressProxy } from "../../src/worker/sandbox/egress-proxy.ts";
import { MAX_GATEWAY_CONNECTIONS, openSandboxNetwork } from "../../src/worker/sandbox/network.ts";

let dir: string;
/** An allowed host that answers a request with a never-ending body (a download the agent walks away from). */
let upstream: HttpServer;
let upstreamPort: number;
/** Resolves each time the upstream sees one of its answers cut off. */
const upstreamClosed: Array<() => void> = [];
/** A stand-in for the model gateway: a TCP listener on loopback that holds what it accepts. */
let gateway: Server;
let gatewayPort: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleet-net-review-"));
  upstream = createHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream" });
    const chunk = Buffer.alloc(16 * 1024, 120);
    const timer = setInterval(() => res.write(chunk), 20);
    res.once("close", () => {
      clearInterval(timer);
      for (const f of upstreamClosed.splice(0)) f();
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  gateway = createServer(() => {});
  await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
  gatewayPort = (gateway.address() as AddressInfo).port;
});

afterAll(async () => {
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  await new Promise<void>((resolve) => gateway?.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

/**
 * Opens `n` idle connections to a unix socket, as an agent holding them would; resolves once each has
 * connected, with how many the other side has closed so far (kept current).
 */
async function holdConnections(socketPath: string, n: number) {
  const sockets: Socket[] = [];
  const state = { closed: 0 };
  const waiters: Array<() => void> = [];
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve, reject) => {
          const s = connect(socketPath);
          sockets.push(s);
          s.once("connect", () => resolve());
          s.once("error", reject);
          s.once("close", () => {
            state.closed++;
            for (const w of waiters.splice(0)) w();
          });
        }),
    ),
  );
  return {
    state,
    sockets,
    /** Waits (at most `ms`) until the other side has closed at least `count`; resolves with how many it had. */
    closedAtLeast(count: number, ms: number): Promise<number> {
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(state.closed), ms);
        const check = () => {
          if (state.closed >= count) {
            clearTimeout(timer);
            resolve(state.closed);
          } else waiters.push(check);
        };
        check();
      });
    },
    destroy() {
      for (const s of sockets) s.destroy();
    },
  };
}

describe("an agent against the worker's side of its network", () => {
  it("cannot hold more than a bounded number of connections open to the egress proxy", async () => {
    const proxy = await startEgressProxy({
      policy: networkPolicyOf({ allow: [], registries: false }),
      socketPath: join(dir, "proxy.sock"),
    });
    const extra = 50;
    const held = await holdConnections(join(dir, "proxy.sock"), MAX_PROXY_CONNECTIONS + extra);
    try {
      // Every connection past the cap is closed by the proxy at once; the others stay usable.
      expect(await held.closedAtLeast(extra, 10_000)).toBeGreaterThanOrEqual(extra);
      const open = held.sockets.find((s) => !s.destroyed && s.readyState === "open")!;
      const answer = await new Promise<string>((resolve) => {
        let data = "";
        open.on("data", (d) => {
          data += d;
        });
        open.once("close", () => resolve(data));
        open.write("CONNECT nowhere.test:443 HTTP/1.1\r\nHost: nowhere.test:443\r\n\r\n");
      });
      expect(answer).toMatch(/^HTTP\/1\.1 403/);
    } finally {
      held.destroy();
      await proxy.close();
    }
  }, 30_000);

  it("cannot hold more than a bounded number of connections open to the model gateway's bridge", async () => {
    const network = await openSandboxNetwork({ policy: networkPolicyOf("none"), gatewayPort });
    // The folder of sockets the sandbox is shown at /run/fleet-net.
    const socketsDir = network.bwrapArgs[network.bwrapArgs.indexOf("/run/fleet-net") - 1]!;
    const extra = 50;
    const held = await holdConnections(join(socketsDir, "gateway.sock"), MAX_GATEWAY_CONNECTIONS + extra);
    try {
      expect(await held.closedAtLeast(extra, 10_000)).toBeGreaterThanOrEqual(extra);
    } finally {
      held.destroy();
      await network.close();
    }
  }, 30_000);

  it("cannot keep the worker's connection to an allowed host open by walking away from a download", async () => {
    const proxy = await startEgressProxy({
      policy: networkPolicyOf({ allow: [`mirror.test:${upstreamPort}`], registries: false }),
      socketPath: join(dir, "plain.sock"),
      hosts: { "mirror.test": "127.0.0.1" },
    });
    try {
      const cutOff = new Promise<"closed">((resolve) => upstreamClosed.push(() => resolve("closed")));
      const agent = connect(join(dir, "plain.sock"));
      await new Promise<void>((resolve) => {
        agent.once("data", () => resolve());
        agent.write(
          `GET http://mirror.test:${upstreamPort}/big.tgz HTTP/1.1\r\nHost: mirror.test:${upstreamPort}\r\n\r\n`,
        );
      });
      // The agent has the answer streaming, and goes away without reading the rest.
      agent.destroy();
      const outcome = await Promise.race([
        cutOff,
        new Promise<"still open">((resolve) => setTimeout(() => resolve("still open"), 10_000)),
      ]);
      expect(outcome).toBe("closed");
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it("cannot grow the list of refused hosts past its cap by naming new ports", async () => {
    const proxy = await startEgressProxy({
      policy: networkPolicyOf({ allow: [], registries: false }),
      socketPath: join(dir, "tally.sock"),
    });
    try {
      for (let i = 0; i < 400; i++) {
        await new Promise<void>((resolve) => {
          const s = connect(join(dir, "tally.sock"));
          s.on("data", () => {});
          s.once("close", () => resolve());
          s.write(`CONNECT h${i}.test:${1000 + i} HTTP/1.1\r\nHost: h${i}.test:${1000 + i}\r\n\r\n`);
        });
      }
      const rows = proxy.refused();
      expect(rows.length).toBeLessThanOrEqual(101);
      expect(rows.reduce((n, r) => n + r.count, 0)).toBe(400);
      expect(rows.find((r) => r.host === "(other hosts)")?.count).toBe(300);
    } finally {
      await proxy.close();
    }
  }, 30_000);
});

describe("an agent's tricks on the egress proxy's parsing", () => {
  it("never reaches a host listener by another spelling, a userinfo, a pipelined or smuggled request", async () => {
    // A listener of the host's: it counts every request that reaches it, by path.
    const reached: string[] = [];
    const host = createHttpServer((req, res) => {
      reached.push(req.url ?? "");
      res.end("host listener\n");
    });
    await new Promise<void>((resolve) => host.listen(0, "127.0.0.1", resolve));
    const p = (host.address() as AddressInfo).port;
    const proxy = await startEgressProxy({
      // registry.test is an operator's mirror on this machine; localhost is allowed but resolves to loopback.
      policy: networkPolicyOf({ allow: [`registry.test:${p}`, `localhost:${p}`], registries: false }),
      socketPath: join(dir, "tricks.sock"),
      hosts: { "registry.test": "127.0.0.1" },
    });
    /** Sends `raw` on one connection to the proxy; resolves with all it answered once it closes the connection. */
    const send = (raw: string) =>
      new Promise<string>((resolve) => {
        const s = connect(join(dir, "tricks.sock"));
        let data = "";
        s.on("data", (d) => {
          data += d;
        });
        s.once("close", () => resolve(data));
        s.on("error", () => {});
        s.write(raw);
      });
    try {
      const refusedOrBad = /^HTTP\/1\.1 (403|400)/;
      for (const authority of [
        `127.0.0.1:${p}`,
        `2130706433:${p}`,
        `0x7f.1:${p}`,
        `127.1:${p}`,
        `[::1]:${p}`,
        `[::ffff:127.0.0.1]:${p}`,
        `[::ffff:7f00:1]:${p}`,
        `localhost:${p}`,
        `registry.test@127.0.0.1:${p}`,
        `registry.test:${p}@127.0.0.1:${p}`,
        `169.254.169.254:80`,
      ])
        expect(
          await send(`CONNECT ${authority} HTTP/1.1\r\nHost: registry.test:${p}\r\n\r\n`),
          authority,
        ).toMatch(refusedOrBad);
      for (const url of [
        `http://registry.test@127.0.0.1:${p}/userinfo`,
        `http://registry.test:${p}@127.0.0.1:${p}/userinfo2`,
        `http://2130706433:${p}/decimal`,
        `http://0x7f.1:${p}/hex`,
        `http://[::ffff:7f00:1]:${p}/mapped`,
        `http://localhost:${p}/dns-loopback`,
        `HTTP://127.0.0.1:${p}/upper`,
      ])
        expect(
          await send(`GET ${url} HTTP/1.1\r\nHost: registry.test:${p}\r\nConnection: close\r\n\r\n`),
          url,
        ).toMatch(refusedOrBad);
      // The Host header never decides: the absolute URI does.
      expect(
        await send(`GET /origin-form HTTP/1.1\r\nHost: registry.test:${p}\r\nConnection: close\r\n\r\n`),
      ).toMatch(refusedOrBad);
      // A second request on a kept-alive connection is checked on its own.
      const pipelined = await send(
        `GET http://registry.test:${p}/first HTTP/1.1\r\nHost: registry.test:${p}\r\n\r\n` +
          `GET http://127.0.0.1:${p}/second HTTP/1.1\r\nHost: registry.test:${p}\r\nConnection: close\r\n\r\n`,
      );
      expect(pipelined).toMatch(/^HTTP\/1\.1 200/);
      expect(pipelined).toMatch(/HTTP\/1\.1 403/);
      // Content-Length and Transfer-Encoding together (a request hidden in a body) are refused outright.
      const smuggled = await send(
        `POST http://registry.test:${p}/outer HTTP/1.1\r\nHost: registry.test:${p}\r\nContent-Length: 63\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://127.0.0.1:${p}/smuggled HTTP/1.1\r\nHost: x\r\n\r\n`,
      );
      expect(smuggled).toMatch(/^HTTP\/1\.1 400/);
      // Only the allowed host's own requests reached the listener.
      expect(reached).toEqual(["/first"]);
      expect(proxy.refused()).toContainEqual(
        expect.objectContaining({ host: "localhost", why: "address refused" }),
      );
    } finally {
      await proxy.close();
      host.closeAllConnections();
      await new Promise<void>((resolve) => host.close(() => resolve()));
    }
  }, 60_000);
});

describe("the addresses the egress proxy never connects to, however they are spelled", () => {
  it("knows loopback, link-local and metadata addresses in every IPv6 spelling, and other clouds' metadata", async () => {
    for (const a of [
      "::ffff:7f00:1",
      "0:0:0:0:0:ffff:7f00:1",
      "::FFFF:127.0.0.1",
      "::ffff:a9fe:a9fe",
      "0:0:0:0:0:0:0:1",
      "::0:1",
      "0::",
      "FE80::1",
      "fe80::1%eth0",
      "FF02::1",
      "fd00:ec2:0::254",
      "fd00:0ec2::0254",
      // Alibaba Cloud's metadata service, and Azure's WireServer (its VM agent's configuration).
      "100.100.100.200",
      "168.63.129.16",
      "not an address",
    ])
      expect(reachableAddress(a), a).toBe(false);
    for (const a of [
      "104.16.0.34",
      "::ffff:104.16.0.34",
      "::ffff:6810:22",
      "2606:4700::6810:1622",
      "10.0.0.5",
    ])
      expect(reachableAddress(a), a).toBe(true);
  });

  it("does not open a tunnel to the host's loopback through an IPv4-mapped literal in hex", async () => {
    const host = createServer((s) => s.end("HOST-LISTENER\n"));
    await new Promise<void>((resolve) => host.listen(0, "127.0.0.1", resolve));
    const p = (host.address() as AddressInfo).port;
    // An allowed address literal (as `network.allow: ["[::ffff:7f00:1]:port"]` would give it).
    const proxy = await startEgressProxy({
      policy: networkPolicyOf({ allow: [`[::ffff:7f00:1]:${p}`], registries: false }),
      socketPath: join(dir, "mapped.sock"),
    });
    try {
      const answer = await new Promise<string>((resolve) => {
        const s = connect(join(dir, "mapped.sock"));
        let data = "";
        s.on("data", (d) => {
          data += d;
          if (data.includes("HOST-LISTENER")) s.destroy();
        });
        s.once("close", () => resolve(data));
        s.write(`CONNECT [::ffff:7f00:1]:${p} HTTP/1.1\r\nHost: [::ffff:7f00:1]:${p}\r\n\r\n`);
      });
      expect(answer).not.toContain("HOST-LISTENER");
      expect(answer).toMatch(/^HTTP\/1\.1 403/);
    } finally {
      await proxy.close();
      await new Promise<void>((resolve) => host.close(() => resolve()));
    }
  }, 30_000);
});
