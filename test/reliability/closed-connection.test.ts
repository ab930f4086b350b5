// A connection the server closes before answering (a kept-alive socket closed as the request went out):
// the token client (the worker's and the CLI's) sends a repeatable request once more, never a POST; a
// POST goes over a connection of its own, which the server cannot be closing as it goes out.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { fetchRetryingClosedConnections, githubForToken } from "../../src/github/octokit-port.ts";

const repo = { owner: "octo-org", repo: "widgets" };

/** A server that drops the first `drops` requests' connections without a byte, then answers. */
async function droppingServer(drops: number) {
  const seen: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (seen.length <= drops) {
      req.socket.destroy();
      return;
    }
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ number: 7, id: 7, title: "t", body: "b", state: "open", labels: [] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe("the token client over a connection closed before its answer", () => {
  it("sends a GET once more and returns its answer", async () => {
    const s = await droppingServer(1);
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    expect((await github.issues.get(repo, 7)).number).toBe(7);
    expect(s.seen).toEqual(["GET /repos/octo-org/widgets/issues/7", "GET /repos/octo-org/widgets/issues/7"]);
  });

  it("gives up after the second closed connection, with the error", async () => {
    const s = await droppingServer(2);
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    await expect(github.issues.get(repo, 7)).rejects.toThrow();
    expect(s.seen).toHaveLength(2);
  });

  it("never sends a POST twice: it may have created what it asked for", async () => {
    const s = await droppingServer(1);
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    await expect(github.issues.create(repo, { title: "t", body: "b" })).rejects.toThrow();
    expect(s.seen).toEqual(["POST /repos/octo-org/widgets/issues"]);
  });
});

/**
 * A server that answers one request per connection and resets a kept-alive connection when a second
 * request comes on it: as a server whose idle timeout closed the connection as the request went out.
 */
async function oneRequestPerConnectionServer() {
  const seen: string[] = [];
  const served = new WeakSet<object>();
  let connections = 0;
  const server = createServer((req: IncomingMessage, res) => {
    if (served.has(req.socket)) {
      req.socket.resetAndDestroy();
      return;
    }
    served.add(req.socket);
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" });
    res.end(JSON.stringify({ number: 8, id: 8, title: "t", body: "b", state: "open", labels: [] }));
  });
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    connections: () => connections,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The answered request's connection goes back to fetch's pool after its body is read (a later tick). */
const backInThePool = () => new Promise((r) => setTimeout(r, 50));

describe("a POST after other requests, the kept-alive connection closed under it", () => {
  it("is sent once, over a connection of its own, and answered", async () => {
    const s = await oneRequestPerConnectionServer();
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    // The GET leaves its connection kept alive; the server resets it if anything else comes on it.
    expect((await github.issues.get(repo, 8)).number).toBe(8);
    await backInThePool();
    const created = await github.issues.create(repo, { title: "t", body: "b" });
    expect(created.number).toBe(8);
    expect(s.seen).toEqual(["GET /repos/octo-org/widgets/issues/8", "POST /repos/octo-org/widgets/issues"]);
    expect(s.connections()).toBe(2);
  });

  it("a plain fetch on the kept-alive connection fails with the reset the POST used to meet", async () => {
    const s = await oneRequestPerConnectionServer();
    stop = s.stop;
    await (await fetch(`${s.url}/repos/octo-org/widgets/issues/8`)).text();
    await backInThePool();
    await expect(
      fetch(`${s.url}/repos/octo-org/widgets/issues`, { method: "POST", body: "{}" }),
    ).rejects.toMatchObject({ cause: { code: "ECONNRESET" } });
    expect(s.seen).toEqual(["GET /repos/octo-org/widgets/issues/8"]);
    expect(s.connections()).toBe(1);
  });

  it("follows a redirect verbatim, and keeps the credentials to the same origin", async () => {
    const seen: Array<{ path: string; method: string; body: string; auth?: string }> = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        seen.push({ path: req.url ?? "", method: req.method ?? "", body, auth: req.headers.authorization });
        if (req.url === "/old") {
          res.writeHead(307, { location: "/new" });
          return void res.end();
        }
        res.writeHead(201, { "content-type": "application/json" });
        res.end('{"ok":true}');
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    stop = () => new Promise<void>((r) => server.close(() => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const res = await fetchRetryingClosedConnections(`${url}/old`, {
      method: "POST",
      body: '{"a":1}',
      headers: { authorization: "token t" },
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ ok: true });
    expect(seen.map((s) => [s.path, s.method, s.body, s.auth])).toEqual([
      ["/old", "POST", '{"a":1}', "token t"],
      ["/new", "POST", '{"a":1}', "token t"],
    ]);
  });
});
