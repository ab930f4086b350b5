import type { IncomingMessage, ServerResponse } from "node:http";

/** One scripted model reply: played for one "main" request of a real agent CLI. */
export interface ScriptTurn {
  text?: string;
  /**
   * Tool calls of the turn. `namespace` (OpenAI only): the namespace tool the function belongs to, as
   * Codex offers MCP tools (`mcp__<server>` holding `<tool>`).
   */
  toolUses?: Array<{ name: string; input: unknown; namespace?: string }>;
  usage?: ScriptUsage;
  /** Answer with an HTTP error instead of a message (the turn is consumed). */
  error?: {
    status: 429 | 500 | 529;
    retryAfter?: number;
    /** Error type in the body (default: the API's usual one for the status), e.g. OpenAI "usage_limit_reached". */
    type?: string;
    /** Epoch seconds, sent as the body's `resets_at` (OpenAI usage limits). */
    resetsAt?: number;
  };
  /** Hold the response open this long (headers sent, no events) before playing the turn. */
  stallMs?: number;
}

export interface ScriptUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
  /** OpenAI only: reasoning tokens, counted inside output_tokens. */
  reasoning_tokens?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON from the CLI under test
  body: any;
  /** How the server classified it: a scripted turn, the post-script final turn, or a side request. */
  kind: "main" | "final" | "side";
  /** Index of the script turn played, for kind "main". */
  turn?: number;
}

export interface ScriptServer {
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Script turns played so far. */
  readonly played: number;
  stop(): Promise<void>;
}

export async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** One server-sent event; an empty `event` writes a `data:` line only (Gemini's streams name no events). */
export function sse(res: ServerResponse, event: string, data: unknown) {
  res.write(`${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`);
}

/** Waits ms, or until the client goes away / the server stops; resolves false if the wait was cut short. */
export function hold(res: ServerResponse, ms: number, stopped: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (stopped.aborted || res.destroyed) return resolve(false);
    const done = (ok: boolean) => {
      clearTimeout(t);
      res.off("close", onClose);
      stopped.removeEventListener("abort", onClose);
      resolve(ok);
    };
    const onClose = () => done(false);
    const t = setTimeout(() => done(true), ms);
    res.on("close", onClose);
    stopped.addEventListener("abort", onClose);
  });
}

/** Rough token estimate for side requests (count_tokens etc.): four characters a token. */
export const estimateTokens = (value: unknown): number =>
  Math.max(1, Math.ceil(JSON.stringify(value ?? "").length / 4));
