// One scripted model per task for many agents at once: a router on loopback that sends each agent's
// requests to a scripted Anthropic server of its own (@fleet/model-servers), chosen by the task the
// prompt names ("issue #N of the repository R"), so every agent plays the same few turns whatever the
// others do. Records when each task's agent first asked and how many runs each task had (a request
// whose conversation is one message long starts a run).
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type ScriptServer, type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";

export interface AgentModels {
  url: string;
  /** Per task key (`owner/repo#N`): first request (epoch ms), runs started, model requests. */
  tasks: Map<string, { firstRequestAt: number; runs: number; requests: number }>;
  stop(): Promise<void>;
}

const USAGE = {
  input_tokens: 1200,
  output_tokens: 60,
  cache_read_input_tokens: 800,
  cache_creation_input_tokens: 40,
};

/** `turns` model turns per run: `turns - 1` Bash commands that append to SCALE-<issue>.md, then a text answer. */
export function scriptFor(issue: string, turns: number, delayMs: number): ScriptTurn[] {
  const file = `SCALE-${issue}.md`;
  return [
    ...Array.from({ length: Math.max(0, turns - 1) }, (_, i) => ({
      toolUses: [
        { name: "Bash", input: { command: `echo "step ${i + 1}" >> ${file}`, description: "edit" } },
      ],
      usage: USAGE,
      stallMs: delayMs,
    })),
    { text: `Wrote ${file}.`, usage: USAGE, stallMs: delayMs },
  ];
}

const TASK = /issue #(\d+) of the repository ([\w.-]+\/[\w.-]+)/;

export async function startAgentModels(opts: { turns: number; delayMs: number }): Promise<AgentModels> {
  const servers = new Map<string, Promise<ScriptServer>>();
  const tasks: AgentModels["tasks"] = new Map();
  const retired: Array<Promise<ScriptServer>> = [];
  // A task's next run (a retry) plays the script from its start on a server of its own.
  const serverFor = (key: string, issue: string, newRun: boolean) => {
    let s = servers.get(key);
    if (s && newRun && (tasks.get(key)?.runs ?? 0) > 1) {
      retired.push(s);
      s = undefined;
    }
    if (!s) {
      s = startAnthropicScriptServer({ turns: scriptFor(issue, opts.turns, opts.delayMs) });
      servers.set(key, s);
    }
    return s;
  };
  const forward = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const text = body.toString("utf8");
    const m = TASK.exec(text);
    const key = m ? `${m[2]}#${m[1]}` : "side";
    let newRun = false;
    if (m && req.url?.startsWith("/v1/messages") && !req.url.includes("count_tokens")) {
      const seen = tasks.get(key) ?? { firstRequestAt: Date.now(), runs: 0, requests: 0 };
      seen.requests++;
      try {
        const parsed = JSON.parse(text) as { messages?: unknown[]; tools?: unknown[] };
        newRun = parsed.messages?.length === 1 && (parsed.tools?.length ?? 0) > 0;
        if (newRun) seen.runs++;
      } catch {
        // not JSON: counted as a request only
      }
      tasks.set(key, seen);
    }
    const target = await serverFor(key, m?.[1] ?? "0", newRun);
    const up = httpRequest(
      {
        host: "127.0.0.1",
        port: target.port,
        // A fresh connection each time: a kept-alive one the server is closing gets a reset.
        agent: false,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, "content-length": String(body.length) },
      },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    up.end(body);
  };
  const server = createServer((req, res) => void forward(req, res).catch(() => res.destroy()));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tasks,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await Promise.all([...servers.values(), ...retired].map(async (s) => (await s).stop()));
    },
  };
}
