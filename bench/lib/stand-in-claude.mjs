#!/usr/bin/env node
// A stand-in for the Claude Code CLI, for benchmarks that run more agents at once than real CLIs fit
// on the machine: it speaks what Fleet reads of `claude -p --output-format stream-json` (init, assistant
// and tool-result lines, the final result with usage) and what the model gateway forwards (POST
// /v1/messages with the run's token), runs the Bash commands the model asks for, and stops at the
// first answer without a tool call. Its first line also says when it started (`bench.startedAt`,
// epoch ms), which is when the sandbox handed over to it. Self-contained: it runs inside the sandbox.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";

const startedAt = performance.timeOrigin + performance.now();
const session = randomUUID();
const argv = process.argv.slice(2);
const model = argv[argv.indexOf("--model") + 1] || "claude-sonnet-4-5";
const base = (process.env.ANTHROPIC_BASE_URL || "https://api.anthropic.com").replace(/\/$/, "");
const key = process.env.ANTHROPIC_API_KEY || process.env.ANTHROPIC_AUTH_TOKEN || "";
const line = (o) => process.stdout.write(`${JSON.stringify({ ...o, session_id: session })}\n`);

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const prompt = Buffer.concat(chunks).toString("utf8");

line({
  type: "system",
  subtype: "init",
  cwd: process.cwd(),
  tools: ["Bash"],
  model,
  bench: { startedAt, pid: process.pid },
});

const BASH = {
  name: "Bash",
  description: "Runs a shell command.",
  input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
};
const messages = [{ role: "user", content: prompt }];
const total = {
  input_tokens: 0,
  output_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
};
let turns = 0;
let last = "";
for (;;) {
  const res = await fetch(`${base}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ model, max_tokens: 1024, tools: [BASH], messages }),
    signal: AbortSignal.timeout(300_000),
  });
  const msg = await res.json();
  if (!res.ok) {
    line({ type: "result", subtype: "error_during_execution", is_error: true, result: JSON.stringify(msg) });
    process.exit(1);
  }
  turns++;
  for (const k of Object.keys(total)) total[k] += msg.usage?.[k] ?? 0;
  line({ type: "assistant", message: msg });
  messages.push({ role: "assistant", content: msg.content });
  const uses = msg.content.filter((b) => b.type === "tool_use");
  last = msg.content.find((b) => b.type === "text")?.text ?? last;
  if (uses.length === 0) break;
  const results = uses.map((u) => {
    let out;
    try {
      out = execFileSync("/bin/sh", ["-c", String(u.input?.command ?? "")], { encoding: "utf8" });
    } catch (e) {
      out = String(e.message);
    }
    return { type: "tool_result", tool_use_id: u.id, content: out };
  });
  line({ type: "user", message: { role: "user", content: results } });
  messages.push({ role: "user", content: results });
}
line({
  type: "result",
  subtype: "success",
  is_error: false,
  num_turns: turns,
  result: last,
  duration_ms: Math.round(performance.timeOrigin + performance.now() - startedAt),
  total_cost_usd: 0,
  usage: total,
});
