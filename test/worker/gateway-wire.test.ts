import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { ScriptServer } from "@fleet/model-servers";
import { startAnthropicScriptServer, startOpenAIScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_CUT_OUTPUT_TOKENS } from "../../src/economy/wire-usage.ts";
import {
  type GatewayResponse,
  type GrantCredentials,
  type ModelGateway,
  startModelGateway,
} from "../../src/worker/sandbox/model-gateway.ts";

let gateway: ModelGateway | undefined;
let server: ScriptServer | undefined;
afterEach(async () => {
  await gateway?.close();
  await server?.stop();
  gateway = undefined;
  server = undefined;
});

const TOOLS = [{ name: "Bash", input_schema: { type: "object" } }];
const anthropicCall = (token: string, stream: boolean) =>
  fetch(`${gateway!.url}/v1/messages?beta=true`, {
    method: "POST",
    headers: { "x-api-key": token, "content-type": "application/json", "accept-encoding": "gzip" },
    body: JSON.stringify({ model: "claude-sonnet-4-5", stream, tools: TOOLS, messages: [] }),
  });

describe("the model gateway reads usage from the wire", () => {
  it("Anthropic: message_start and message_delta of a stream, and a whole JSON message, give the script's figures and tool calls", async () => {
    const usage = {
      input_tokens: 1200,
      output_tokens: 345,
      cache_read_input_tokens: 5000,
      cache_creation_input_tokens: 700,
    };
    server = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Bash", input: { command: "ls -la /tmp/a/very/long/path/to/split/in/deltas" } }],
          usage,
        },
        { text: "done", usage: { input_tokens: 10, output_tokens: 2 } },
      ],
    });
    gateway = await startModelGateway();
    const seen: GatewayResponse[] = [];
    const grant = gateway.grant(server.url, "sk-ant-real", undefined, { onResponse: (r) => seen.push(r) });
    const streamed = await (await anthropicCall(grant.token, true)).text();
    expect(streamed).toContain("event: message_delta");
    const whole = (await (await anthropicCall(grant.token, false)).json()) as { usage: unknown };
    expect(whole.usage).toMatchObject({ input_tokens: 10 });
    expect(seen.map((r) => r.turn)).toEqual([
      {
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        usage: { input: 1200, output: 345, cacheRead: 5000, cacheWrite: 700, reasoning: 0 },
        metered: true,
        toolCalls: [{ name: "Bash", input: '{"command":"ls -la /tmp/a/very/long/path/to/split/in/deltas"}' }],
      },
      {
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        usage: { input: 10, output: 2, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
        metered: true,
        toolCalls: [],
      },
    ]);
    expect(seen.every((r) => r.credential === "credential" && r.status === 200)).toBe(true);
  });

  it("OpenAI Responses: response.completed gives input without the cached part, cached as cache read, reasoning", async () => {
    server = await startOpenAIScriptServer({
      turns: [
        {
          toolUses: [{ name: "exec_command", input: { cmd: "ls", workdir: "/w" } }],
          usage: {
            input_tokens: 3000,
            cache_read_input_tokens: 1000,
            output_tokens: 400,
            reasoning_tokens: 100,
          },
        },
      ],
    });
    gateway = await startModelGateway();
    const seen: GatewayResponse[] = [];
    const grant = gateway.grant(server.url, "sk-openai-real", undefined, { onResponse: (r) => seen.push(r) });
    const res = await fetch(`${gateway.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${grant.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "o4-mini",
        stream: true,
        tools: [{ type: "function", name: "exec_command" }],
      }),
    });
    expect(await res.text()).toContain("response.completed");
    expect(seen[0]?.turn).toEqual({
      provider: "openai",
      model: "o4-mini",
      usage: { input: 2000, output: 400, cacheRead: 1000, cacheWrite: 0, reasoning: 100 },
      metered: true,
      toolCalls: [{ name: "exec_command", input: '{"cmd":"ls","workdir":"/w"}' }],
    });
  });

  it("refuses a request the run's policy refuses with a 400 both CLIs read, and sends nothing upstream", async () => {
    server = await startAnthropicScriptServer({ turns: [] });
    gateway = await startModelGateway();
    const grant = gateway.grant(server.url, "sk-ant-real", undefined, {
      admit: async () => "stopped: over the ceiling",
    });
    const res = await anthropicCall(grant.token, true);
    expect(res.status).toBe(400);
    const body = (await res.json()) as {
      type: string;
      error: { type: string; message: string; code: string };
    };
    expect(body).toEqual({
      type: "error",
      error: {
        type: "invalid_request_error",
        code: "invalid_request_error",
        message: "Fleet stopped this run: stopped: over the ceiling",
      },
    });
    expect(server.requests).toHaveLength(0);
  });

  it("retries a 429 on the pool's next credential with the same body; the agent sees only the answer", async () => {
    server = await startAnthropicScriptServer({
      turns: [
        { error: { status: 429, retryAfter: 30 } },
        { text: "ok", usage: { input_tokens: 50, output_tokens: 5 } },
      ],
    });
    gateway = await startModelGateway();
    const limited: Array<{ name: string; retryAfterSeconds?: number }> = [];
    let current = { name: "KEY_A", value: "sk-ant-aaaa" };
    const pool: GrantCredentials = {
      current: () => current,
      rateLimited: async (name, info) => {
        limited.push({ name, ...info });
        current = { name: "KEY_B", value: "sk-ant-bbbb" };
        return current;
      },
    };
    const seen: GatewayResponse[] = [];
    const grant = gateway.grant(server.url, pool, undefined, { onResponse: (r) => seen.push(r) });
    const res = await anthropicCall(grant.token, true);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"text":"ok"');
    expect(limited).toEqual([{ name: "KEY_A", retryAfterSeconds: 30 }]);
    const keys = server.requests.map((r) => r.headers["x-api-key"]);
    expect(keys).toEqual(["sk-ant-aaaa", "sk-ant-bbbb"]);
    expect(server.requests[0]!.body).toEqual(server.requests[1]!.body);
    expect(seen.map((r) => [r.credential, r.status, r.turn?.usage.input])).toEqual([
      ["KEY_A", 429, undefined],
      ["KEY_B", 200, 50],
    ]);
  });

  it("passes the 429 on when the pool has no other credential", async () => {
    server = await startAnthropicScriptServer({ turns: [{ error: { status: 429, retryAfter: 7 } }] });
    gateway = await startModelGateway();
    const pool: GrantCredentials = {
      current: () => ({ name: "KEY_A", value: "sk-ant-aaaa" }),
      rateLimited: async () => undefined,
    };
    const res = await anthropicCall(gateway.grant(server.url, pool).token, true);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("7");
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe("rate_limit_error");
  });
});

/** An upstream that starts an Anthropic stream (message_start, one text delta) and never ends it. */
async function startHangingUpstream(usage: Record<string, number>) {
  const open = new Set<import("node:http").ServerResponse>();
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const message = { model: "claude-sonnet-4-5", usage: { ...usage, output_tokens: 1 } };
      res.write(`event: message_start\ndata: ${JSON.stringify({ type: "message_start", message })}\n\n`);
      res.write(
        `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } })}\n\n`,
      );
      open.add(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** The upstream breaks off every open answer. */
    breakOff: () => {
      for (const res of open) res.destroy();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const res of open) res.destroy();
        server.close(() => r());
      }),
  };
}

/** Reads the first bytes of a streamed answer, then goes away (the agent is killed, it gives up). */
async function readFirstBytesAndLeave(url: string, token: string, body: object): Promise<void> {
  const abort = new AbortController();
  const res = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": token, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: abort.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  abort.abort();
  await reader.read().catch(() => undefined);
}

describe("an answer cut off before its end is still charged", () => {
  it("the agent disconnects mid-stream: the prompt as message_start said it, the output at the request's max_tokens", async () => {
    const upstream = await startHangingUpstream({ input_tokens: 50_000, cache_read_input_tokens: 10_000 });
    try {
      gateway = await startModelGateway();
      const seen: GatewayResponse[] = [];
      let settled = 0;
      const answered = new Promise<void>((resolve) => {
        const grant = gateway!.grant(upstream.url, "sk-ant-real", undefined, {
          onResponse: (r) => {
            seen.push(r);
            resolve();
          },
          settled: () => void settled++,
        });
        void readFirstBytesAndLeave(gateway!.url, grant.token, {
          model: "claude-sonnet-4-5",
          stream: true,
          max_tokens: 4096,
        });
      });
      await answered;
      expect(seen).toHaveLength(1);
      expect(seen[0]!.cut).toBe(true);
      expect(seen[0]!.turn).toMatchObject({
        metered: true,
        model: "claude-sonnet-4-5",
        usage: { input: 50_000, cacheRead: 10_000, output: 4096 },
      });
      await new Promise((r) => setTimeout(r, 20));
      expect(settled).toBe(1);
    } finally {
      await upstream.close();
    }
  });

  it("the upstream breaks off: charged the same way; without max_tokens the documented default", async () => {
    const upstream = await startHangingUpstream({ input_tokens: 7_000 });
    try {
      gateway = await startModelGateway();
      const seen: GatewayResponse[] = [];
      const grant = gateway.grant(upstream.url, "sk-ant-real", undefined, {
        onResponse: (r) => seen.push(r),
      });
      const res = await fetch(`${gateway.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": grant.token, "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-sonnet-4-5", stream: true }),
      });
      const reader = res.body!.getReader();
      await reader.read();
      upstream.breakOff();
      await reader.read().catch(() => undefined);
      await vi.waitFor(() => expect(seen).toHaveLength(1));
      expect(seen[0]!.turn?.usage).toMatchObject({ input: 7_000, output: DEFAULT_CUT_OUTPUT_TOKENS });
    } finally {
      await upstream.close();
    }
  });
});
