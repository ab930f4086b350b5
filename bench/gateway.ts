// The model gateway's overhead: the latency it adds to a model request (a small streamed answer,
// metered and policed as a run's requests are), and the bytes per second it streams through while it
// reads the usage on the way. Each figure is direct-to-upstream vs through the gateway, same upstream.
// `tsx bench/gateway.ts` prints and saves bench/results/gateway.json; `npm run bench` includes it.
import { writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { startModelGateway } from "../src/worker/sandbox/model-gateway.ts";

const SMALL_EVENTS = [
  'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"claude-sonnet-4-5","usage":{"input_tokens":1200,"cache_read_input_tokens":30000,"output_tokens":1}}}\n\n',
  'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello."}}\n\n',
  'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
  'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}\n\n',
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
].join("");

/** An upstream that answers `/small` with one short streamed message and `/large` with `bytes` of text deltas. */
async function startUpstream(largeBytes: number): Promise<{ url: string; server: Server }> {
  const delta = `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${"x".repeat(900)}"}}\n\n`;
  const chunk = Buffer.from(delta.repeat(64));
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (!req.url?.startsWith("/large")) return void res.end(SMALL_EVENTS);
      let sent = 0;
      const pump = () => {
        while (sent < largeBytes) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end(SMALL_EVENTS);
      };
      pump();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const BODY = JSON.stringify({
  model: "claude-sonnet-4-5",
  stream: true,
  messages: [{ role: "user", content: "hi" }],
});

async function call(base: string, path: string, token: string): Promise<number> {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "x-api-key": token, "content-type": "application/json" },
    body: BODY,
  });
  let bytes = 0;
  for await (const c of res.body!) bytes += (c as Uint8Array).length;
  return bytes;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const round = (n: number, d = 3) => +n.toFixed(d);

export async function runGatewayBench(opts: { requests?: number; largeMB?: number } = {}) {
  const requests = opts.requests ?? 400;
  const largeBytes = (opts.largeMB ?? 64) << 20;
  const upstream = await startUpstream(largeBytes);
  const gateway = await startModelGateway();
  let turns = 0;
  // As a run's grant: every request admitted by the policy, every answer metered.
  const grant = gateway.grant(upstream.url, "sk-bench-credential", undefined, {
    admit: () => undefined,
    onResponse: (r) => {
      if (r.turn?.metered) turns++;
    },
  });
  try {
    const latencies = { direct: [] as number[], gateway: [] as number[] };
    for (let i = 0; i < 20; i++) {
      await call(upstream.url, "/v1/messages", "x");
      await call(gateway.url, "/v1/messages", grant.token);
    }
    // Interleaved, so load on the machine hits both sides alike.
    for (let i = 0; i < requests; i++) {
      let t = performance.now();
      await call(upstream.url, "/v1/messages", "x");
      latencies.direct.push(performance.now() - t);
      t = performance.now();
      await call(gateway.url, "/v1/messages", grant.token);
      latencies.gateway.push(performance.now() - t);
    }
    const stream = async (base: string, token: string) => {
      const t = performance.now();
      const bytes = await call(base, "/large/v1/messages", token);
      return { bytes, seconds: (performance.now() - t) / 1000 };
    };
    const direct = await stream(upstream.url, "x");
    const through = await stream(gateway.url, grant.token);
    // What the gateway adds to each request: the two answers of a pair, one through it and one not.
    const added = latencies.gateway.map((g, i) => g - latencies.direct[i]!);
    const p50 = quantile(added, 0.5);
    const p99 = quantile(added, 0.99);
    return {
      requests,
      directP50Ms: round(quantile(latencies.direct, 0.5)),
      gatewayP50Ms: round(quantile(latencies.gateway, 0.5)),
      addedP50Ms: round(Math.max(0, p50)),
      addedP99Ms: round(Math.max(0, p99)),
      streamMB: round(through.bytes / (1 << 20), 1),
      directMBps: round(direct.bytes / (1 << 20) / direct.seconds, 1),
      gatewayMBps: round(through.bytes / (1 << 20) / through.seconds, 1),
      meteredTurns: turns,
    };
  } finally {
    await gateway.close();
    await new Promise<void>((r) => upstream.server.close(() => r()));
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runGatewayBench();
  console.log(JSON.stringify(r, null, 2));
  await writeFile(join(import.meta.dirname, "results", "gateway.json"), `${JSON.stringify(r, null, 2)}\n`);
}
