import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { type ModelGateway, startModelGateway } from "../../src/worker/sandbox/model-gateway.ts";

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An upstream that records requests and answers with a few server-sent events. */
async function startUpstream(): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(200, { "content-type": "text/event-stream", "x-upstream": "yes" });
      res.write("event: message_start\ndata: {}\n\n");
      setTimeout(() => res.end("event: message_stop\ndata: {}\n\n"), 20);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

let gateway: ModelGateway | undefined;
let upstream: Awaited<ReturnType<typeof startUpstream>> | undefined;
afterEach(async () => {
  await gateway?.close();
  await new Promise<void>((r) => (upstream ? upstream.server.close(() => r()) : r()));
  gateway = undefined;
  upstream = undefined;
});

describe("the model gateway", () => {
  it("swaps the run token for the credential in the header it came in, and streams the answer through", async () => {
    upstream = await startUpstream();
    gateway = await startModelGateway();
    const grant = gateway.grant(`${upstream.url}/prefix`, "sk-ant-the-real-key-000000000");
    const res = await fetch(`${gateway.url}/v1/messages?beta=true`, {
      method: "POST",
      headers: {
        "x-api-key": grant.token,
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
      },
      body: JSON.stringify({ model: "m", stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-upstream")).toBe("yes");
    expect(await res.text()).toBe("event: message_start\ndata: {}\n\nevent: message_stop\ndata: {}\n\n");
    expect(upstream.seen).toHaveLength(1);
    const [req] = upstream.seen;
    expect(req).toMatchObject({
      method: "POST",
      url: "/prefix/v1/messages?beta=true",
      body: '{"model":"m","stream":true}',
    });
    expect(req!.headers["x-api-key"]).toBe("sk-ant-the-real-key-000000000");
    expect(req!.headers["anthropic-version"]).toBe("2023-06-01");
    expect(JSON.stringify(req!.headers)).not.toContain(grant.token);
  });

  it("a bearer token (OpenAI, OAuth) goes back out as a bearer credential", async () => {
    upstream = await startUpstream();
    gateway = await startModelGateway();
    const grant = gateway.grant(upstream.url, "sk-openai-real-000000000000");
    await (
      await fetch(`${gateway.url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${grant.token}` },
        body: "{}",
      })
    ).text();
    expect(upstream.seen[0]!.headers.authorization).toBe("Bearer sk-openai-real-000000000000");
  });

  it("answers 401 and reaches no upstream without a live token (none, a wrong one, a revoked one)", async () => {
    upstream = await startUpstream();
    gateway = await startModelGateway();
    const grant = gateway.grant(upstream.url, "real");
    const wrong = `fleet-run-${"0".repeat(48)}`;
    for (const headers of [{}, { "x-api-key": wrong }, { authorization: "Bearer real" }] as Array<
      Record<string, string>
    >) {
      const res = await fetch(`${gateway.url}/v1/messages`, { method: "POST", headers, body: "{}" });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    }
    grant.revoke();
    const revoked = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": grant.token },
      body: "{}",
    });
    expect(revoked.status).toBe(401);
    expect(upstream.seen).toHaveLength(0);
    expect(gateway.forwarded).toBe(0);
  });

  it("says 502 when the upstream cannot be reached", async () => {
    gateway = await startModelGateway();
    const grant = gateway.grant("http://127.0.0.1:1", "real");
    const res = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": grant.token },
      body: "{}",
    });
    expect(res.status).toBe(502);
    expect(await res.text()).toContain("could not reach http://127.0.0.1:1");
  });

  it("forwards only the coder's model requests: no batches, files or fine-tunes on the real key", async () => {
    upstream = await startUpstream();
    gateway = await startModelGateway();
    const grant = gateway.grant(upstream.url, "real", claudeAdapter.modelRoutes);
    const call = (method: string, path: string) =>
      fetch(`${gateway!.url}${path}`, {
        method,
        headers: { "x-api-key": grant.token },
        body: method === "GET" ? undefined : "{}",
      });
    expect((await call("POST", "/v1/messages?beta=true")).status).toBe(200);
    expect((await call("POST", "/v1/messages/count_tokens")).status).toBe(200);
    for (const [method, path] of [
      ["POST", "/v1/messages/batches"],
      ["DELETE", "/v1/files/file_1"],
      ["POST", "/v1/files"],
      ["GET", "/v1/organizations/api_keys"],
    ] as const) {
      const res = await call(method, path);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(
        "only this coder's model requests",
      );
    }
    expect(upstream.seen.map((r) => r.url)).toEqual(["/v1/messages?beta=true", "/v1/messages/count_tokens"]);
  });
});
