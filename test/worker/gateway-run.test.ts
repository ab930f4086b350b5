// A run's rules at the model gateway (gateway-run.ts), over real HTTP on loopback: the gateway in
// front of a fake upstream that answers as a model API would, headers and all.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { GuardLimits } from "../../src/core/run-guard.ts";
import { WindowBook } from "../../src/economy/credential-windows.ts";
import {
  createGatewayRun,
  type GatewayRunOptions,
  gatewayRunFor,
  type RunPool,
  reportedTotals,
} from "../../src/worker/sandbox/gateway-run.ts";
import { type ModelGateway, startModelGateway } from "../../src/worker/sandbox/model-gateway.ts";

interface Answer {
  status?: number;
  headers?: Record<string, string>;
  usage?: Record<string, number>;
  model?: string;
}

/** A fake Anthropic upstream: answers each request with `answer(i)` (a JSON message), once `gate(i)` opens. */
async function startUpstream(answer: (i: number) => Answer, gate?: (i: number) => Promise<void> | undefined) {
  const seen: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  const server = createServer((req, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const i = seen.length;
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      await gate?.(i);
      if (res.destroyed) return;
      const a = answer(i);
      const status = a.status ?? 200;
      const body =
        status === 200
          ? {
              type: "message",
              model: a.model ?? "claude-sonnet-4-5-20250929",
              content: [{ type: "text", text: "ok" }],
              usage: a.usage ?? { input_tokens: 1000, output_tokens: 10 },
            }
          : { type: "error", error: { type: "rate_limit_error", message: "slow down" } };
      res.writeHead(status, { "content-type": "application/json", ...(a.headers ?? {}) });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

let gateway: ModelGateway | undefined;
let upstream: Awaited<ReturnType<typeof startUpstream>> | undefined;
afterEach(async () => {
  await gateway?.close();
  await upstream?.close();
  gateway = undefined;
  upstream = undefined;
});

/** A gateway run over `upstream` (the plan phase: no worktree to watch), and a way to ask it. */
async function gatewayRun(limits: GuardLimits, more: Partial<GatewayRunOptions> = {}) {
  gateway = await startModelGateway();
  const stops: string[] = [];
  const run = createGatewayRun({
    phase: "plan",
    limits,
    credential: { name: "KEY_A", value: "sk-ant-aaaa" },
    clock: () => new Date(),
    onStop: (reason) => stops.push(reason),
    ...more,
  });
  const grant = gateway.grant(upstream!.url, run.credentials, undefined, run.policy);
  const ask = (body: object = {}, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${gateway!.url}/v1/messages`, {
      method: "POST",
      ...(signal ? { signal } : {}),
      headers: { "x-api-key": grant.token, "content-type": "application/json", ...headers },
      body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 1000, messages: [], ...body }),
    });
  return { run, stops, ask };
}

const pool = (book = new WindowBook()): RunPool => ({
  coder: "claude",
  book,
  rotate: async () => ({ name: "KEY_B", value: "sk-ant-bbbb" }),
  next: () => undefined,
});

describe("rate-limit headers that are no time", () => {
  const CRAZY = {
    "anthropic-ratelimit-unified-5h-utilization": "0.5",
    "anthropic-ratelimit-unified-5h-reset": "1e300",
    "x-ratelimit-limit-tokens": "1000",
    "x-ratelimit-remaining-tokens": "10",
    "x-ratelimit-reset-tokens": "99999999999999h",
  };

  it("an answer with them is metered all the same", async () => {
    upstream = await startUpstream(() => ({ headers: CRAZY }));
    const { run, ask } = await gatewayRun({}, { pool: pool() });
    const res = await ask();
    expect(res.status).toBe(200);
    await res.text();
    expect(run.guard.turns).toBe(1);
    expect(run.totals("m", 1)?.usage).toMatchObject({ input: 1000, output: 10 });
  });

  it("a 429 with them is still retried on the next credential; the agent sees the answer", async () => {
    upstream = await startUpstream((i) => (i === 0 ? { status: 429, headers: CRAZY } : {}));
    const { run, ask } = await gatewayRun({}, { pool: pool() });
    const res = await ask();
    expect(res.status).toBe(200);
    await res.text();
    expect(upstream.seen.map((s) => s.headers["x-api-key"])).toEqual(["sk-ant-aaaa", "sk-ant-bbbb"]);
    expect(run.guard.turns).toBe(1);
  });
});

describe("requests in flight count against the ceilings", () => {
  it("parallel requests just under the token ceiling: only as many as fit go out, the rest are refused", async () => {
    let open!: () => void;
    const opened = new Promise<void>((r) => {
      open = r;
    });
    upstream = await startUpstream(
      () => ({ usage: { input_tokens: 9_000, output_tokens: 1_000 } }),
      (i) => (i === 0 ? undefined : opened),
    );
    const { ask, stops } = await gatewayRun({ tokens: 35_000 });
    await (await ask()).text();
    // 10,000 used, each request reads at least 10,000: two more fit under 35,000, not five.
    const answers = Array.from({ length: 5 }, () => ask());
    const refused = [];
    for (const a of answers.slice(2)) refused.push((await a).status);
    expect(refused).toEqual([400, 400, 400]);
    expect(upstream.seen).toHaveLength(3);
    open();
    expect(await Promise.all(answers.slice(0, 2).map(async (a) => (await a).status))).toEqual([200, 200]);
    expect(stops[0]).toContain("and it and 2 more in flight read at least 10,000 each");
  });

  it("a request the agent gave up on is settled: its hold on the ceiling goes", async () => {
    upstream = await startUpstream(
      () => ({ usage: { input_tokens: 9_000, output_tokens: 1_000 } }),
      (i) => (i === 1 ? new Promise(() => undefined) : undefined),
    );
    const { ask, stops } = await gatewayRun({ tokens: 25_000 });
    await (await ask()).text();
    // 10,000 used: one request in flight (20,000 at least) fits under 25,000; two would not.
    const leave = new AbortController();
    const gone = ask({}, {}, leave.signal).catch(() => "gone");
    await vi.waitFor(() => expect(upstream!.seen).toHaveLength(2));
    leave.abort();
    expect(await gone).toBe("gone");
    await new Promise((r) => setTimeout(r, 50));
    const next = await ask();
    expect(next.status).toBe(200);
    await next.text();
    expect(stops).toEqual([]);
  });
});

describe("a cut-off answer's price", () => {
  it("is the configured model's when the answer was cut off before it named one", async () => {
    // Headers sent, then nothing: the answer never says which model it is.
    const held = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.flushHeaders();
      });
    });
    await new Promise<void>((r) => held.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(held.address() as AddressInfo).port}`;
    upstream = { url, seen: [], close: () => new Promise<void>((r) => held.close(() => r())) };
    const { run, ask, stops } = await gatewayRun({ usd: 0.1 }, { model: "claude-sonnet-4-5" });
    const leave = new AbortController();
    const body = { stream: true };
    const gone = ask(body, {}, leave.signal).then(
      (res) => res.text(),
      () => "gone",
    );
    await new Promise((r) => setTimeout(r, 200));
    leave.abort();
    await gone.catch(() => undefined);
    await vi.waitFor(() => expect(run.guard.turns).toBe(1));
    // Charged its request's max_tokens (1,000) of output at Sonnet's $15 a million, and its prompt by size.
    const sent = JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 1000, messages: [], ...body });
    const input = Math.ceil(Buffer.byteLength(sent) / 4);
    expect(run.guard.unpriced).toBe(false);
    expect(run.guard.usage).toMatchObject({ input, output: 1_000 });
    expect(run.guard.costUsd).toBeCloseTo((input * 3 + 1_000 * 15) / 1_000_000, 6);
    expect(stops).toEqual([]);
  });
});

describe("requests in flight count against their credential's windows", () => {
  it("a request is in flight on its credential, at the size of the run's turns, until it is answered or given up", async () => {
    let open!: () => void;
    const opened = new Promise<void>((r) => {
      open = r;
    });
    upstream = await startUpstream(
      () => ({
        usage: { input_tokens: 2_000, cache_read_input_tokens: 10_000, output_tokens: 0 },
        headers: {
          "anthropic-ratelimit-tokens-limit": "100000",
          "anthropic-ratelimit-tokens-remaining": "16000",
          "anthropic-ratelimit-tokens-reset": new Date(Date.now() + 60_000).toISOString(),
        },
      }),
      (i) => (i === 1 ? opened : i === 2 ? new Promise(() => undefined) : undefined),
    );
    const book = new WindowBook();
    const { ask } = await gatewayRun({}, { pool: pool(book) });
    // The first request: no turn yet, estimated from its size (4 bytes a token).
    const body = { messages: [{ role: "user", content: "x".repeat(4_000) }] };
    const first = ask(body);
    await vi.waitFor(() => expect(upstream!.seen).toHaveLength(1));
    await (await first).text();
    expect(book.inFlight("claude", "KEY_A").requests).toBe(0);
    expect(book.get("claude", "KEY_A")?.windows.tokens?.remaining).toBe(16_000);
    // The next one counts as the last turn (12,000 tokens) until its answer is recorded.
    const second = ask();
    await vi.waitFor(() => expect(upstream!.seen).toHaveLength(2));
    expect(book.inFlight("claude", "KEY_A")).toEqual({
      requests: 1,
      tokens: 12_000,
      inputTokens: 2_000,
      outputTokens: 0,
    });
    open();
    await (await second).text();
    expect(book.inFlight("claude", "KEY_A").requests).toBe(0);
    // One the agent gives up on goes too.
    const leave = new AbortController();
    const gone = ask({}, {}, leave.signal).catch(() => "gone");
    await vi.waitFor(() => expect(upstream!.seen).toHaveLength(3));
    expect(book.inFlight("claude", "KEY_A").requests).toBe(1);
    leave.abort();
    expect(await gone).toBe("gone");
    await vi.waitFor(() => expect(book.inFlight("claude", "KEY_A").requests).toBe(0));
  });

  it("the estimate before a run has a turn is its request's size; after, its turns' largest figures", async () => {
    const { inFlightEstimate, largestTurn } = await import("../../src/worker/sandbox/gateway-run.ts");
    expect(inFlightEstimate(undefined, { bodyBytes: 4_001 })).toEqual({
      tokens: 1_001,
      inputTokens: 1_001,
      outputTokens: 0,
    });
    const main = largestTurn(undefined, {
      input: 2_000,
      output: 300,
      cacheRead: 10_000,
      cacheWrite: 500,
      reasoning: 0,
    });
    expect(main).toEqual({ tokens: 12_800, inputTokens: 2_500, outputTokens: 300 });
    // A side answer (a session title) metered after it does not shrink what the next request counts as.
    const side = largestTurn(main, { input: 20, output: 5, cacheRead: 0, cacheWrite: 0, reasoning: 0 });
    expect(inFlightEstimate(side, { bodyBytes: 40 })).toEqual(main);
  });
});

describe("one builder for every agent run at the gateway", () => {
  it("counts what the task spent before the run (a plan phase, a rebase's earlier steps) against the ceilings", async () => {
    upstream = await startUpstream(() => ({ usage: { input_tokens: 9_000, output_tokens: 1_000 } }));
    gateway = await startModelGateway();
    const stops: string[] = [];
    const earlier = {
      usage: { input: 30_000, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
      costUsd: 0.09,
    };
    const run = gatewayRunFor(
      { perTaskLimits: { tokens: 35_000 } },
      { phase: "plan", earlier, credential: { name: "KEY_A", value: "sk" }, onStop: (r) => stops.push(r) },
    );
    const grant = gateway.grant(upstream.url, run.credentials, undefined, run.policy);
    const res = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": grant.token },
      body: "{}",
    });
    await res.text();
    expect(stops).toEqual([
      "stopped: the task used 40,000 tokens, over the per-task ceiling of 35,000 (budgets.per_task_tokens)",
    ]);
    // The run's own figures are its report's; the earlier spend is not in them twice.
    expect(run.totals("m", 1)?.usage.input).toBe(9_000);
  });

  it("a run leaves its credential once, however often it is disposed (a finally after a normal end)", () => {
    const book = new WindowBook();
    const make = () =>
      createGatewayRun({
        phase: "plan",
        limits: {},
        credential: { name: "KEY_A", value: "sk" },
        pool: pool(book),
        clock: () => new Date(),
        onStop: () => undefined,
      });
    const [a] = [make(), make()];
    expect(book.active("claude", "KEY_A")).toBe(2);
    a!.dispose();
    a!.dispose();
    expect(book.active("claude", "KEY_A")).toBe(1);
  });

  it("reports the gateway's figures, the agent's own cost standing in where the model has no price", () => {
    const usage = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, reasoning: 0 };
    const metered = { usage, costUsd: null, turns: 1, durationMs: 1, model: "m" };
    const own = { usage: { ...usage, input: 5 }, costUsd: 0.5, turns: 1, durationMs: 1, model: "m" };
    expect(reportedTotals(metered, own)).toEqual({ ...metered, costUsd: 0.5 });
    expect(reportedTotals({ ...metered, costUsd: 0.2 }, own)?.costUsd).toBe(0.2);
    expect(reportedTotals(undefined, own)).toBe(own);
  });
});

describe("the context window a run asked for", () => {
  const BIG = { input_tokens: 1_000, cache_read_input_tokens: 299_000, output_tokens: 100 };

  it("a sonnet[1m] task is held against 1M, though the answer names claude-sonnet-4-5 without [1m]", async () => {
    upstream = await startUpstream(() => ({ usage: BIG, model: "claude-sonnet-4-5-20250929" }));
    const { run, stops, ask } = await gatewayRun({ maxContextPct: 80 }, { model: "sonnet[1m]" });
    await (await ask()).text();
    expect(stops).toEqual([]);
    expect(run.guard.context).toMatchObject({ tokens: 300_000, window: 1_000_000 });
    expect(run.totals("m", 1)?.model).toBe("claude-sonnet-4-5-20250929");
  });

  it("so is a request that asks for the context-1m beta; without either, 200k and the limit stops it", async () => {
    upstream = await startUpstream(() => ({ usage: BIG, model: "claude-sonnet-4-5-20250929" }));
    const beta = await gatewayRun({ maxContextPct: 80 }, { model: "sonnet" });
    await (await beta.ask({}, { "anthropic-beta": "oauth-2025-04-20,context-1m-2025-08-07" })).text();
    expect(beta.stops).toEqual([]);
    expect(beta.run.guard.context?.window).toBe(1_000_000);
    await gateway?.close();
    const plain = await gatewayRun({ maxContextPct: 80 }, { model: "sonnet" });
    await (await plain.ask()).text();
    expect(plain.run.guard.context?.window).toBe(200_000);
    expect(plain.stops[0]).toContain("over max_context_pct 80");
  });
});
