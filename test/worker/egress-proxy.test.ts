// Fleet's egress proxy on a unix socket, spoken to as HTTPS_PROXY/HTTP_PROXY clients speak to a proxy:
// CONNECT for TLS (and anything else), absolute-form requests for plain HTTP. Hosts the tests stand in
// for are names mapped to a loopback listener, as an operator maps a mirror (FLEET_EGRESS_HOSTS).
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { networkPolicyOf } from "../../src/core/network-policy.ts";
import {
  type EgressProxy,
  parseEgressHosts,
  startEgressProxy,
} from "../../src/worker/sandbox/egress-proxy.ts";

let upstream: Server;
let port: number;
let dir: string;
let proxy: EgressProxy;

beforeAll(async () => {
  upstream = createServer((req, res) =>
    res.end(`upstream saw ${req.method} ${req.url} host=${req.headers.host}\n`),
  );
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  port = (upstream.address() as AddressInfo).port;
  dir = await mkdtemp(join(tmpdir(), "fleet-egress-"));
  proxy = await startEgressProxy({
    policy: networkPolicyOf({ allow: [`mirror.test:${port}`, "10.255.255.1:9"], registries: false }),
    socketPath: join(dir, "proxy.sock"),
    hosts: { "mirror.test": "127.0.0.1", "other.test": "127.0.0.1" },
    connectTimeoutMs: 2000,
  });
});

afterAll(async () => {
  await proxy?.close();
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

/** A plain HTTP request through the proxy (absolute form). */
function viaProxy(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: join(dir, "proxy.sock"), path: url, method: "GET", headers: { host: new URL(url).host } },
      (res) => {
        let body = "";
        res.on("data", (d) => {
          body += d;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** A CONNECT through the proxy; on success, one HTTP request through the tunnel. */
function tunnel(authority: string): Promise<{ head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(join(dir, "proxy.sock"));
    let data = "";
    let sent = false;
    s.on("data", (d) => {
      data += d;
      if (!sent && data.startsWith("HTTP/1.1 200")) {
        sent = true;
        s.write(`GET /through HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
      }
    });
    s.on("error", reject);
    s.on("close", () => {
      const [head, ...rest] = data.split("\r\n\r\n");
      resolve({ head: head ?? "", body: rest.join("\r\n\r\n") });
    });
    s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  });
}

describe("egress proxy", () => {
  it("passes an allowed host's plain HTTP request on, and tunnels CONNECT to it", async () => {
    const plain = await viaProxy(`http://mirror.test:${port}/pkg?x=1`);
    expect(plain.status).toBe(200);
    expect(plain.body).toBe(`upstream saw GET /pkg?x=1 host=mirror.test:${port}\n`);
    const t = await tunnel(`mirror.test:${port}`);
    expect(t.head).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(t.body).toContain("upstream saw GET /through");
  });

  it("refuses hosts and ports not allowed, loopback and metadata addresses, and counts each", async () => {
    expect((await viaProxy(`http://other.test:${port}/`)).status).toBe(403);
    expect((await viaProxy(`http://other.test:${port}/again`)).status).toBe(403);
    expect((await tunnel(`mirror.test:${port + 1}`)).head).toMatch(/^HTTP\/1\.1 403/);
    expect((await viaProxy(`http://127.0.0.1:${port}/`)).status).toBe(403);
    expect((await tunnel("169.254.169.254:80")).head).toMatch(/^HTTP\/1\.1 403/);
    const refused = proxy.refused();
    expect(refused).toContainEqual({ host: "other.test", port, count: 2, why: "not allowed" });
    expect(refused).toContainEqual({ host: "mirror.test", port: port + 1, count: 1, why: "not allowed" });
    expect(refused).toContainEqual({ host: "127.0.0.1", port, count: 1, why: "not allowed" });
    expect(refused).toContainEqual({ host: "169.254.169.254", port: 80, count: 1, why: "not allowed" });
    // The body says why, and where to allow a host.
    expect((await viaProxy(`http://other.test:${port}/`)).body).toMatch(
      /network\.allow in \.github\/fleet\.yml/,
    );
  });

  it("records a host name it cannot trust as such, and bounds the list it keeps", async () => {
    await tunnel("mention@everyone.test:443");
    expect(proxy.refused().some((r) => r.host === "(not a host name)")).toBe(true);
    for (let i = 0; i < 120; i++) await viaProxy(`http://flood${i}.test/`);
    const rows = proxy.refused();
    expect(rows.length).toBeLessThanOrEqual(101);
    expect(rows.find((r) => r.host === "(other hosts)")?.count).toBeGreaterThan(0);
  });

  it("reads FLEET_EGRESS_HOSTS, refusing what is not name=address", () => {
    expect(parseEgressHosts("registry.internal=10.0.0.5, Mirror.Test.=127.0.0.1")).toEqual({
      "registry.internal": "10.0.0.5",
      "mirror.test": "127.0.0.1",
    });
    expect(() => parseEgressHosts("registry.internal")).toThrow(/is not name=address/);
    expect(() => parseEgressHosts("a=not-an-ip")).toThrow(/FLEET_EGRESS_HOSTS/);
    expect(parseEgressHosts(undefined)).toEqual({});
  });
});
