// What every model request carries: the first request a real coder CLI sends for a small task, as Fleet
// invokes it (the adapter's own arguments, work phase, the proxy network), and the input tokens of the
// whole small task. Per coder: firstRequestBytes, systemBytes, tools, toolsBytes, taskInputTokens.
// `tsx bench/prompt.ts` prints and saves bench/results/prompt.json; `npm run bench` includes it.
import { mkdtempSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { estimateTokens, type RecordedRequest, startAnthropicScriptServer } from "@fleet/model-servers";
import { claudeAdapter } from "../src/agents/claude.ts";
import type { AgentAdapter, AgentInvocation } from "../src/agents/types.ts";
import { runAgent } from "../src/worker/sandbox/run-agent.ts";

export interface PromptFigures {
  firstRequestBytes: number;
  systemBytes: number;
  tools: number;
  toolNames: string[];
  toolsBytes: number;
  /** The input tokens (fresh + cache read + cache write) of every main request of the small task. */
  taskInputTokens: number;
  requests: number;
}

const bytes = (v: unknown) => (v === undefined ? 0 : Buffer.byteLength(JSON.stringify(v)));
const CLI = (name: string) => new URL(`../node_modules/.bin/${name}`, import.meta.url).pathname;

/** The same small task as the end-to-end tests: write one file, then say done. */
const SMALL_TASK = [
  {
    text: "I will create the file.",
    toolUses: [{ name: "Write", input: { file_path: "HELLO.md", content: "hello\n" } }],
  },
  { text: "Done: created HELLO.md" },
];

function figuresOf(requests: RecordedRequest[]): PromptFigures {
  const main = requests.filter((r) => r.kind === "main" || r.kind === "final");
  const first = main[0]?.body ?? {};
  const tools: Array<{ name?: string }> = Array.isArray(first.tools) ? first.tools : [];
  return {
    firstRequestBytes: bytes(first),
    systemBytes: bytes(first.system),
    tools: tools.length,
    toolNames: tools.map((t) => t.name ?? "?"),
    toolsBytes: bytes(first.tools),
    // Estimated from each request's text as the scripted server estimates usage it is not told.
    taskInputTokens: main.reduce((n, r) => n + estimateTokens(r.body), 0),
    requests: main.length,
  };
}

async function measure(adapter: AgentAdapter, cli: string): Promise<PromptFigures> {
  const server = await startAnthropicScriptServer({ turns: SMALL_TASK });
  const cwd = mkdtempSync(join(tmpdir(), "fleet-bench-prompt-"));
  const home = mkdtempSync(join(tmpdir(), "fleet-bench-prompt-home-"));
  try {
    const inv: AgentInvocation = {
      prompt: "Create HELLO.md containing hello.",
      model: "claude-sonnet-4-5",
      phase: "work",
      cwd,
      home,
      network: "proxy",
      modelBaseUrl: server.url,
      credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-bench" },
    };
    const r = await runAgent(adapter, inv, { timeoutMs: 60_000, stallMs: 45_000, binaryPath: cli });
    if (r.reason !== "completed") throw new Error(`the ${adapter.coder} run ended ${r.reason}`);
    return figuresOf(server.requests);
  } finally {
    await server.stop();
    rmSync(cwd, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
}

export async function runPromptBench(): Promise<Record<string, PromptFigures>> {
  return { claude: await measure(claudeAdapter, CLI("claude")) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runPromptBench();
  for (const [coder, f] of Object.entries(r))
    console.log(
      `${coder}: first request ${(f.firstRequestBytes / 1024).toFixed(1)} KB (target < 70 KB), system ${(f.systemBytes / 1024).toFixed(1)} KB, ${f.tools} tools ${(f.toolsBytes / 1024).toFixed(1)} KB [${f.toolNames.join(", ")}], small task ${f.taskInputTokens} input tokens over ${f.requests} requests`,
    );
  await writeFile(join(import.meta.dirname, "results", "prompt.json"), `${JSON.stringify(r, null, 2)}\n`);
}
