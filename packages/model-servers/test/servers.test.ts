import { afterEach, describe, expect, it } from "vitest";
import { startAnthropicScriptServer } from "../src/anthropic-server.ts";
import { startOpenAIScriptServer } from "../src/openai-server.ts";
import type { ScriptServer } from "../src/script.ts";

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** Reads an SSE body into [event, data] pairs. */
async function sseEvents(res: Response): Promise<Array<{ event: string; data: Record<string, unknown> }>> {
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((b) => b.trim())
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? "";
      const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "{}") as Record<string, unknown>;
      return { event, data };
    });
}

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const tools = [{ name: "Write", input_schema: { type: "object" } }];

describe("scripted Anthropic server", () => {
  it("streams text and tool_use (input_json_delta) with usage, one script turn per main request", async () => {
    server = await startAnthropicScriptServer({
      turns: [
        {
          text: "Writing.",
          toolUses: [{ name: "Write", input: { file_path: "A.md", content: "x".repeat(100) } }],
          usage: {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_input_tokens: 5,
            cache_creation_input_tokens: 7,
          },
        },
      ],
    });
    const res = await post(`${server.url}/v1/messages`, { model: "m", stream: true, tools, messages: [] });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const events = await sseEvents(res);
    expect(events[0]?.event).toBe("message_start");
    expect(events.at(-1)?.event).toBe("message_stop");
    const delta = events.find((e) => e.event === "message_delta")?.data;
    expect(delta).toMatchObject({
      delta: { stop_reason: "tool_use" },
      usage: {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_input_tokens: 5,
        cache_creation_input_tokens: 7,
      },
    });
    const json = events
      .filter((e) => (e.data.delta as { type?: string })?.type === "input_json_delta")
      .map((e) => (e.data.delta as { partial_json: string }).partial_json)
      .join("");
    expect(JSON.parse(json)).toEqual({ file_path: "A.md", content: "x".repeat(100) });
    const start = events.find((e) => (e.data.content_block as { type?: string })?.type === "tool_use");
    expect(start?.data.content_block).toMatchObject({ name: "Write" });
    expect(server.played).toBe(1);

    // After the script: a final text turn.
    const after = await sseEvents(
      await post(`${server.url}/v1/messages`, { model: "m", stream: true, tools, messages: [] }),
    );
    expect(after.find((e) => e.event === "message_delta")?.data).toMatchObject({
      delta: { stop_reason: "end_turn" },
    });
    expect(server.requests.map((r) => r.kind)).toEqual(["main", "final"]);
  });

  it("answers side requests (no tools, count_tokens, HEAD /) without using the script", async () => {
    server = await startAnthropicScriptServer({ turns: [{ text: "main turn" }] });
    const title = await post(`${server.url}/v1/messages`, {
      model: "m",
      messages: [{ role: "user", content: "title please" }],
      output_config: {
        format: { type: "json_schema", schema: { properties: { title: { type: "string" } } } },
      },
    });
    const body = (await title.json()) as {
      content: Array<{ text: string }>;
      usage: { input_tokens: number };
    };
    expect(JSON.parse(body.content[0]?.text ?? "")).toEqual({ title: "Scripted session" });
    expect(body.usage.input_tokens).toBe(0);
    const count = await post(`${server.url}/v1/messages/count_tokens`, {
      model: "m",
      messages: [{ role: "user", content: "abcd" }],
    });
    expect(((await count.json()) as { input_tokens: number }).input_tokens).toBeGreaterThan(0);
    expect((await fetch(server.url, { method: "HEAD" })).status).toBe(200);
    expect(server.played).toBe(0);
    const main = (await (
      await post(`${server.url}/v1/messages`, { model: "m", tools, messages: [] })
    ).json()) as {
      content: Array<{ text: string }>;
    };
    expect(main.content[0]?.text).toBe("main turn");
  });

  it("errors with retry-after, and stalls that stop() cuts short", async () => {
    server = await startAnthropicScriptServer({
      turns: [
        { error: { status: 429, retryAfter: 7 } },
        { error: { status: 529 } },
        { text: "late", stallMs: 60_000 },
      ],
    });
    const r429 = await post(`${server.url}/v1/messages`, { model: "m", stream: true, tools, messages: [] });
    expect(r429.status).toBe(429);
    expect(r429.headers.get("retry-after")).toBe("7");
    expect(await r429.json()).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: "scripted 429" },
    });
    const r529 = await post(`${server.url}/v1/messages`, { model: "m", tools, messages: [] });
    expect(((await r529.json()) as { error: { type: string } }).error.type).toBe("overloaded_error");
    const stalled = await post(`${server.url}/v1/messages`, {
      model: "m",
      stream: true,
      tools,
      messages: [],
    });
    expect(stalled.status).toBe(200); // headers first, then nothing
    const reading = stalled.text().catch((e: unknown) => `closed: ${String(e)}`);
    await server.stop();
    server = undefined;
    expect(await reading).toMatch(/closed|^$/);
  });
});

describe("scripted OpenAI Responses server", () => {
  it("streams message and function_call items and response.completed with usage details", async () => {
    server = await startOpenAIScriptServer({
      turns: [
        {
          text: "Running.",
          toolUses: [
            { name: "exec_command", input: { cmd: "ls", workdir: "." } },
            { name: "ask", namespace: "mcp__docs", input: { q: "?" } },
          ],
          usage: { input_tokens: 50, cache_read_input_tokens: 20, output_tokens: 9, reasoning_tokens: 4 },
        },
      ],
    });
    const events = await sseEvents(
      await post(`${server.url}/v1/responses`, {
        model: "o4-mini",
        stream: true,
        tools: [{ name: "exec_command" }],
        input: [],
      }),
    );
    const types = events.map((e) => e.event);
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_text.delta");
    expect(types.at(-1)).toBe("response.completed");
    const done = events.filter((e) => e.event === "response.output_item.done").map((e) => e.data.item);
    expect(done[1]).toMatchObject({
      type: "function_call",
      name: "exec_command",
      arguments: '{"cmd":"ls","workdir":"."}',
    });
    expect(done[1]).not.toHaveProperty("namespace");
    expect(done[2]).toMatchObject({ type: "function_call", name: "ask", namespace: "mcp__docs" });
    const completed = events.at(-1)?.data.response as { usage: unknown };
    expect(completed.usage).toEqual({
      input_tokens: 50,
      input_tokens_details: { cached_tokens: 20 },
      output_tokens: 9,
      output_tokens_details: { reasoning_tokens: 4 },
      total_tokens: 59,
    });
  });

  it("429 with retry-after, then the final turn; tool-less requests are side requests", async () => {
    server = await startOpenAIScriptServer({ turns: [{ error: { status: 429, retryAfter: 2 } }] });
    const r = await post(`${server.url}/v1/responses`, { model: "m", tools: [{ name: "x" }], input: [] });
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("2");
    expect(((await r.json()) as { error: { type: string } }).error.type).toBe("rate_limit_exceeded");
    const side = await post(`${server.url}/v1/responses`, { model: "m", stream: false, input: [] });
    expect(((await side.json()) as { status: string }).status).toBe("completed");
    await post(`${server.url}/v1/responses`, {
      model: "m",
      stream: false,
      tools: [{ name: "x" }],
      input: [],
    });
    expect(server.requests.map((q) => q.kind)).toEqual(["main", "side", "final"]);
  });
});
