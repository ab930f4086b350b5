import { readdir, readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { RecordedRequest } from "@fleet/model-servers";

/**
 * Canary secrets for the containment tests. Each is set in the environment of the worker process
 * (a child process) before Fleet starts, so `/proc/<pid>/environ` of that process shows it.
 */
export const CANARY = {
  modelKey: "sk-ant-canary-real-model-key-0123456789abcdefghij",
  otherKey: "sk-proj-canary-unrelated-openai-key-0123456789abcdefgh",
  fleetSecret: "fleet-canary-worker-secret-9f8e7d6c5b4a",
  sshKey:
    "-----BEGIN OPENSSH PRIVATE KEY-----\ncanary-ssh-key-material-5a4b3c2d1e\n-----END OPENSSH PRIVATE KEY-----\n",
};

/** Every canary value plus the worker's GitHub token, and the forms an agent would smuggle them in. */
export function leakForms(values: readonly string[]): string[] {
  const forms: string[] = [];
  for (const v of values) {
    const core = v.includes("PRIVATE KEY") ? "canary-ssh-key-material-5a4b3c2d1e" : v;
    forms.push(
      core,
      Buffer.from(core).toString("base64").slice(0, 24),
      Buffer.from(core).toString("hex").slice(0, 24),
    );
    forms.push([...core].reverse().join(""));
  }
  return forms;
}

/** The first form of a leak found in `text`, for an assertion message that says what leaked. */
export function findLeak(text: string, forms: readonly string[]): string | undefined {
  return forms.find((f) => f.length >= 12 && text.includes(f));
}

/** What the agent saw: every tool result the CLI sent back to the model, as text. */
export function toolResults(requests: readonly RecordedRequest[]): string {
  const out: string[] = [];
  for (const r of requests) {
    for (const m of r.body?.messages ?? []) {
      if (!Array.isArray(m.content)) continue;
      for (const block of m.content) {
        if (block?.type !== "tool_result") continue;
        out.push(typeof block.content === "string" ? block.content : JSON.stringify(block.content));
      }
    }
  }
  return out.join("\n");
}

/** An attacker's HTTP server on loopback: records every request (method, url, headers). */
export async function startAttackerServer(): Promise<{
  url: string;
  hits: Array<{ method: string; url: string; headers: Record<string, unknown> }>;
  stop(): Promise<void>;
}> {
  const hits: Array<{ method: string; url: string; headers: Record<string, unknown> }> = [];
  const server: Server = createServer((req, res) => {
    hits.push({ method: req.method ?? "", url: req.url ?? "", headers: { ...req.headers } });
    res.writeHead(401, { "www-authenticate": 'Basic realm="attacker"' });
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Host processes whose command line contains `marker` (Linux /proc). */
export async function processesWith(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, "utf8").catch(() => "");
    const stat = await readFile(`/proc/${name}/stat`, "utf8").catch(() => "");
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    if (cmdline.replace(/\0/g, " ").includes(marker) && state !== "Z") pids.push(Number(name));
  }
  return pids;
}
