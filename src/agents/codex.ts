import { CODERS } from "../core/coders.ts";
import { coderCommand, defineAdapter } from "./adapter.ts";
import { arr, type Json, looksRateLimited, num, obj, str, totals } from "./json-line.ts";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "./types.ts";

/** Model provider name Fleet configures when it points Codex at its own base URL. */
const PROVIDER = "fleet";

/**
 * OpenAI Codex CLI (`@openai/codex`), headless: `codex exec --json`. The prompt goes on stdin (`-`).
 * Codex ignores OPENAI_BASE_URL, so a base URL is configured as its own model provider with
 * `-c model_providers.fleet.*` (wire_api "responses"). Plan phase: `--sandbox read-only`; work
 * phase: `--sandbox workspace-write` (writes inside the working directory only).
 *
 * Usage: Codex's `input_tokens` INCLUDES the cached (and cache-written) prompt tokens. Fleet's
 * TokenUsage counts them apart, so input = input_tokens - cached_input_tokens - cache_write_input_tokens,
 * cacheRead = cached_input_tokens, cacheWrite = cache_write_input_tokens; input + cacheRead + cacheWrite
 * is Codex's input_tokens again. Reasoning tokens are already inside output_tokens. Codex reports no
 * cost (costUsd null), no duration and no model: the runner fills those in.
 * On `exec resume`, turn.completed.usage is the THREAD's running total (codex-cli 0.171.0), so a
 * resumed run's own share is its totals minus the earlier run's; Claude's result counts one run only.
 */
export const codexAdapter: AgentAdapter = defineAdapter("codex", {
  command(inv: AgentInvocation) {
    const options = ["--json", "--model", inv.model, "--skip-git-repo-check"];
    // Inside Fleet's sandbox (the worktree read-only in a plan phase) Codex's own is not nested.
    const own = inv.phase === "plan" ? "read-only" : "workspace-write";
    options.push("--sandbox", inv.sandboxed ? "danger-full-access" : own);
    options.push("-c", 'approval_policy="never"');
    if (inv.modelBaseUrl) {
      const keyEnv = inv.credential?.name ?? CODERS.codex.credential.env;
      // modelBaseUrl is the server root (as for ANTHROPIC_BASE_URL); Codex wants the /v1 prefix.
      const root = inv.modelBaseUrl.replace(/\/+$/, "");
      const baseUrl = root.endsWith("/v1") ? root : `${root}/v1`;
      options.push(
        "-c",
        `model_provider=${PROVIDER}`,
        "-c",
        `model_providers.${PROVIDER}.name=${PROVIDER}`,
        "-c",
        `model_providers.${PROVIDER}.base_url=${JSON.stringify(baseUrl)}`,
        "-c",
        `model_providers.${PROVIDER}.wire_api="responses"`,
        "-c",
        `model_providers.${PROVIDER}.env_key=${JSON.stringify(keyEnv)}`,
      );
    }
    options.push(...codexOptionArgs(inv));
    const args = inv.resumeSessionId
      ? ["exec", ...options, "resume", inv.resumeSessionId, "-"]
      : ["exec", ...options, "-"];
    return coderCommand("codex", inv, args, {}, ["HOME", "CODEX_HOME"]);
  },
  parse: parseCodex,
});

/**
 * `options.append_system_prompt` as Codex's `developer_instructions` and `options.mcp_servers` as its
 * `mcp_servers.<name>.*` settings, each a `-c key=value` override whose value is TOML (a JSON string,
 * list or mapping of strings is one). Local servers are Codex's children, inside the sandbox under its
 * network; a remote one (url) is passed only on the host's network.
 */
function codexOptionArgs(inv: AgentInvocation): string[] {
  const o = inv.options ?? {};
  const args: string[] = [];
  if (o.append_system_prompt)
    args.push("-c", `developer_instructions=${JSON.stringify(o.append_system_prompt)}`);
  const host = inv.network === undefined || inv.network === "host";
  for (const [name, server] of Object.entries(o.mcp_servers ?? {})) {
    const at = `mcp_servers.${name}`;
    if ("url" in server) {
      if (host) args.push("-c", `${at}.url=${JSON.stringify(server.url)}`);
      continue;
    }
    args.push("-c", `${at}.command=${JSON.stringify(server.command)}`);
    if (server.args) args.push("-c", `${at}.args=${JSON.stringify(server.args)}`);
    if (server.env) {
      const table = Object.entries(server.env).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
      args.push("-c", `${at}.env={${table.join(",")}}`);
    }
  }
  return args;
}

function parseCodex(o: Json): AgentEvent[] | null {
  switch (o.type) {
    case "thread.started":
      return [{ type: "init", sessionId: str(o.thread_id) }];
    case "turn.started":
      return [];
    case "item.started":
      return itemStarted(obj(o.item));
    case "item.updated":
      // Its plan, re-sent as the agent ticks it: read as a call of `todo_list` (the checklist's source).
      return obj(o.item).type === "todo_list" ? todoList(obj(o.item)) : [];
    case "item.completed":
      return itemCompleted(obj(o.item));
    case "turn.completed": {
      const u = obj(o.usage);
      const cached = num(u.cached_input_tokens);
      const cacheWrite = num(u.cache_write_input_tokens);
      const usage = {
        input: Math.max(0, num(u.input_tokens) - cached - cacheWrite),
        cacheRead: cached,
        cacheWrite,
        output: num(u.output_tokens),
        reasoning: num(u.reasoning_output_tokens),
      };
      return [
        { type: "usage", usage },
        { type: "result", ok: true, totals: totals(usage, { turns: 1 }) },
      ];
    }
    case "turn.failed": {
      const message = str(obj(o.error).message) ?? "codex: turn failed";
      const events: AgentEvent[] = [];
      events.push(looksRateLimited(message) ? { type: "rate_limit", message } : { type: "error", message });
      events.push({ type: "result", ok: false, totals: totals({}, { turns: 1 }), summary: message });
      return events;
    }
    case "error": {
      // Also used for transient notices ("Reconnecting... 1/5 (...429...)"); turn.failed is the verdict.
      const message = str(o.message) ?? "codex: error";
      return [looksRateLimited(message) ? { type: "rate_limit", message } : { type: "error", message }];
    }
    default:
      return null;
  }
}

const todoList = (item: Json): AgentEvent[] => [
  { type: "tool_use", name: "todo_list", id: str(item.id), input: { items: arr(item.items) } },
];

function itemStarted(item: Json): AgentEvent[] {
  switch (item.type) {
    case "todo_list":
      return todoList(item);
    case "command_execution":
      return [{ type: "tool_use", name: "command", id: str(item.id), input: { command: item.command } }];
    case "mcp_tool_call":
      return [
        {
          type: "tool_use",
          name: `${str(item.server) ?? "mcp"}.${str(item.tool) ?? "tool"}`,
          id: str(item.id),
          input: item.arguments,
        },
      ];
    default:
      return [];
  }
}

function itemCompleted(item: Json): AgentEvent[] {
  const id = str(item.id);
  switch (item.type) {
    case "agent_message":
      return [{ type: "text", text: str(item.text) ?? "" }];
    case "reasoning":
      return [];
    case "command_execution":
      return [
        {
          type: "tool_result",
          id,
          isError: item.status === "failed" || (typeof item.exit_code === "number" && item.exit_code !== 0),
          output: str(item.aggregated_output) ?? "",
        },
      ];
    case "file_change":
      return [
        { type: "tool_use", name: "file_change", id, input: { changes: item.changes } },
        {
          type: "tool_result",
          id,
          isError: item.status === "failed",
          output: JSON.stringify(item.changes ?? []),
        },
      ];
    case "mcp_tool_call":
      return [
        {
          type: "tool_result",
          id,
          isError: item.status === "failed",
          output: JSON.stringify(item.result ?? item.error ?? null),
        },
      ];
    case "web_search":
      return [{ type: "tool_use", name: "web_search", id, input: { query: item.query } }];
    case "todo_list":
      return todoList(item);
    case "error":
      // Non-fatal notices such as "Model metadata for `o4-mini` not found".
      return [{ type: "error", message: str(item.message) ?? "codex: error item" }];
    default:
      return [{ type: "unknown", raw: JSON.stringify({ type: "item.completed", item }) }];
  }
}
