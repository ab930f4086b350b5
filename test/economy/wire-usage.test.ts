import { describe, expect, it } from "vitest";
import { createWireReader, wireProviderOf } from "../../src/economy/wire-usage.ts";

const sse = (events: Array<[string, unknown]>) =>
  events.map(([e, d]) => `${e ? `event: ${e}\n` : ""}data: ${JSON.stringify(d)}\n\n`).join("");

/** Feeds `text` in pieces of `size` bytes, the way a stream may cut it (inside events and characters). */
function read(provider: Parameters<typeof createWireReader>[0], type: string, text: string, size: number) {
  const reader = createWireReader(provider, type);
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += size) reader.push(bytes.subarray(i, i + size));
  return reader.finish();
}

describe("usage read from the wire", () => {
  it("knows the model requests of each API by method and path", () => {
    expect(wireProviderOf("POST", "/v1/messages")).toBe("anthropic");
    expect(wireProviderOf("POST", "/anthropic/v1/messages")).toBe("anthropic");
    expect(wireProviderOf("POST", "/v1/messages/count_tokens")).toBeUndefined();
    expect(wireProviderOf("POST", "/v1/responses")).toBe("openai");
    expect(wireProviderOf("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent")).toBe("gemini");
    expect(wireProviderOf("POST", "/v1beta/models/gemini-2.5-pro:generateContent")).toBe("gemini");
    expect(wireProviderOf("GET", "/v1/models")).toBeUndefined();
  });

  it("Anthropic SSE cut anywhere (also inside a multi-byte character) gives the same figures and tool input", () => {
    const text = sse([
      [
        "message_start",
        {
          type: "message_start",
          message: {
            model: "claude-opus-4-5",
            usage: {
              input_tokens: 7,
              cache_read_input_tokens: 900,
              cache_creation_input_tokens: 30,
              output_tokens: 1,
            },
          },
        },
      ],
      [
        "content_block_start",
        { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      ],
      [
        "content_block_delta",
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "héllo ✓" } },
      ],
      [
        "content_block_start",
        {
          type: "content_block_start",
          index: 1,
          content_block: { type: "tool_use", name: "Edit", input: {} },
        },
      ],
      [
        "content_block_delta",
        {
          type: "content_block_delta",
          index: 1,
          delta: { type: "input_json_delta", partial_json: '{"a": ' },
        },
      ],
      [
        "content_block_delta",
        { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '"✓"}' } },
      ],
      ["message_delta", { type: "message_delta", usage: { output_tokens: 321 } }],
      ["message_stop", { type: "message_stop" }],
    ]);
    for (const size of [1, 3, 7, 64, text.length]) {
      expect(read("anthropic", "text/event-stream; charset=utf-8", text, size)).toEqual({
        provider: "anthropic",
        model: "claude-opus-4-5",
        usage: { input: 7, output: 321, cacheRead: 900, cacheWrite: 30, reasoning: 0 },
        metered: true,
        toolCalls: [{ name: "Edit", input: '{"a":"✓"}' }],
      });
    }
  });

  it("Gemini: the last usageMetadata of a stream counts; cached content is cache read, thoughts are output", () => {
    const chunk = (parts: unknown[], usage: Record<string, number>) => ({
      candidates: [{ content: { role: "model", parts } }],
      usageMetadata: usage,
      modelVersion: "gemini-2.5-pro",
    });
    const text = sse([
      [
        "",
        chunk([{ text: "Let me look." }], {
          promptTokenCount: 5000,
          cachedContentTokenCount: 4000,
          candidatesTokenCount: 3,
        }),
      ],
      [
        "",
        chunk([{ functionCall: { name: "read_file", args: { path: "a.ts" } } }], {
          promptTokenCount: 5000,
          cachedContentTokenCount: 4000,
          candidatesTokenCount: 40,
          thoughtsTokenCount: 60,
          totalTokenCount: 5100,
        }),
      ],
    ]);
    const turn = read("gemini", "text/event-stream", text, 50);
    expect(turn).toEqual({
      provider: "gemini",
      model: "gemini-2.5-pro",
      usage: { input: 1000, output: 100, cacheRead: 4000, cacheWrite: 0, reasoning: 60 },
      metered: true,
      toolCalls: [{ name: "read_file", input: '{"path":"a.ts"}' }],
    });
    const whole = read(
      "gemini",
      "application/json",
      JSON.stringify(chunk([], { promptTokenCount: 10, candidatesTokenCount: 2 })),
      4,
    );
    expect(whole.usage).toMatchObject({ input: 10, output: 2 });
  });

  it("an answer without usage (cut off, not JSON) is not metered", () => {
    expect(read("openai", "text/event-stream", 'data: {"type":"response.created"}\n\n', 10).metered).toBe(
      false,
    );
    expect(read("anthropic", "application/json", "<html>bad gateway</html>", 10).metered).toBe(false);
  });
});
