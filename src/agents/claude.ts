import { toolName, toolsRefusedOn } from "../core/coder-options.ts";
import type { TokenUsage } from "../core/usage.ts";
import { coderCommand, defineAdapter } from "./adapter.ts";
import { arr, contentText, isoTime, type Json, num, obj, optNum, str, totals } from "./json-line.ts";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "./types.ts";

/** Tools the work phase may use without asking (headless runs cannot answer a permission prompt). */
export const CLAUDE_WORK_TOOLS = ["Bash", "Edit", "Write", "Read", "Glob", "Grep"];

/** Its to-do list: the tracking comment's checklist is read from these calls. */
const CLAUDE_TODO_TOOLS = ["TaskCreate", "TaskUpdate", "TaskList"];

/**
 * The only tools the CLI offers the model (`--tools`): every request re-sends each tool's schema, and a
 * headless task in a sandbox has no use for cron, wake-ups, worktree switching, messaging, sub-agents or
 * notebooks (25 tools were 82 KB of every request; these are under 30 KB). The plan phase reads and
 * ends with ExitPlanMode, whose input is the plan.
 */
export function claudeTools(phase: AgentInvocation["phase"], web: string[]): string[] {
  const base = phase === "plan" ? ["Bash", "Read", "Glob", "Grep", "ExitPlanMode"] : CLAUDE_WORK_TOOLS;
  return [...base, ...CLAUDE_TODO_TOOLS, ...web];
}

/**
 * Claude Code's web tools under the run's network. WebSearch runs at the model provider, outside
 * Fleet's egress proxy, so it is off unless the network is the host's. WebFetch runs in the CLI and
 * honours HTTPS_PROXY: with the proxy it is allowed (its hosts are the allowlist's; the CLI's own
 * preflight to claude.ai is skipped, as its `skipWebFetchPreflight` setting does for restricted
 * networks); with no network it is off.
 */
export function claudeWebTools(network: AgentInvocation["network"]): {
  allowed: string[];
  disallowed: string[];
  settings?: Record<string, unknown>;
} {
  if (network === undefined || network === "host") return { allowed: [], disallowed: [] };
  if (network === "none") return { allowed: [], disallowed: ["WebSearch", "WebFetch"] };
  return { allowed: ["WebFetch"], disallowed: ["WebSearch"], settings: { skipWebFetchPreflight: true } };
}

/**
 * Claude Code (`@anthropic-ai/claude-code`), headless: `claude -p --output-format stream-json --verbose`.
 * The prompt goes on stdin (no argv length limit, no option parsing of prompts that start with "-").
 * As root the CLI refuses --dangerously-skip-permissions, so the work phase uses
 * `--permission-mode acceptEdits` plus `--allowedTools`; the plan phase uses `--permission-mode plan`.
 */
export const claudeAdapter: AgentAdapter = defineAdapter("claude", {
  command(inv: AgentInvocation) {
    const args = ["-p", "--output-format", "stream-json", "--verbose", "--model", inv.model];
    args.push(...claudeToolArgs(inv));
    if (inv.resumeSessionId) args.push("--resume", inv.resumeSessionId);
    args.push(...claudeOptionArgs(inv));
    return coderCommand("claude", inv, args, {
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
      DISABLE_AUTOUPDATER: "1",
      // Also stops the side request for a session title.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    });
  },
  parse: parseClaude,
});

/**
 * `--tools`, the permission mode, `--allowedTools` and `--disallowedTools` for the phase and network,
 * with `options.allowed_tools` in place of the work phase's own list and `options.disallowed_tools`
 * added. What the network refuses (WebSearch unless host; WebFetch with none) stays off whatever the
 * options say: the config check refuses it already, and this holds if a check is ever skipped.
 */
function claudeToolArgs(inv: AgentInvocation): string[] {
  const args: string[] = [];
  const web = claudeWebTools(inv.network);
  const refused = toolsRefusedOn(inv.network);
  const hostWeb = inv.network === undefined || inv.network === "host" ? ["WebFetch", "WebSearch"] : [];
  const denied = (inv.options?.disallowed_tools ?? []).filter((r) => !r.includes("("));
  const allowedRules = (inv.options?.allowed_tools ?? CLAUDE_WORK_TOOLS).filter(
    (r) => !refused.includes(toolName(r)),
  );
  // Built-in tools only: MCP tools come from --mcp-config, not --tools.
  const builtIn = unique(allowedRules.map(toolName).filter((t) => !t.startsWith("mcp__")));
  const base = inv.phase === "plan" ? claudeTools("plan", []) : [...builtIn, ...CLAUDE_TODO_TOOLS];
  const offered = unique([...base, ...web.allowed, ...hostWeb]).filter((t) => !denied.includes(t));
  args.push("--tools", offered.join(","));
  if (inv.phase === "plan") args.push("--permission-mode", "plan");
  else
    args.push(
      "--permission-mode",
      "acceptEdits",
      "--allowedTools",
      unique([...allowedRules, ...web.allowed]).join(","),
    );
  const disallowed = unique([...web.disallowed, ...(inv.options?.disallowed_tools ?? [])]);
  if (disallowed.length) args.push("--disallowedTools", disallowed.join(","));
  if (web.settings) args.push("--settings", JSON.stringify(web.settings));
  return args;
}

const unique = (xs: string[]): string[] => [...new Set(xs)];

/**
 * `--max-turns`, `--append-system-prompt` and the MCP servers (`--mcp-config` as JSON with
 * `--strict-mcp-config`, so no server of the repository's .mcp.json or the user's settings is loaded).
 * Local servers are child processes of the CLI, inside the sandbox under its network; a remote one
 * (url) is passed only on the host's network.
 */
function claudeOptionArgs(inv: AgentInvocation): string[] {
  const o = inv.options ?? {};
  const args: string[] = [];
  if (o.max_turns !== undefined) args.push("--max-turns", String(o.max_turns));
  if (o.append_system_prompt) args.push("--append-system-prompt", o.append_system_prompt);
  const host = inv.network === undefined || inv.network === "host";
  const servers = Object.entries(o.mcp_servers ?? {}).filter(([, s]) => host || !("url" in s));
  if (servers.length) {
    const mcpServers = Object.fromEntries(
      servers.map(([name, s]) => [
        name,
        "url" in s ? { type: s.type ?? "http", url: s.url } : { type: "stdio", ...s },
      ]),
    );
    args.push("--mcp-config", JSON.stringify({ mcpServers }), "--strict-mcp-config");
  }
  return args;
}

function parseClaude(o: Json): AgentEvent[] | null {
  switch (o.type) {
    case "system":
      return parseSystem(o);
    case "assistant":
      return parseAssistant(o);
    case "user":
      return arr(obj(o.message).content)
        .map(obj)
        .filter((b) => b.type === "tool_result")
        .map((b) => ({
          type: "tool_result" as const,
          id: str(b.tool_use_id),
          isError: b.is_error === true,
          output: contentText(b.content),
        }));
    case "result":
      return parseResult(o);
    case "rate_limit_event": {
      const info = obj(o.rate_limit_info);
      // "allowed" / "allowed_warning" are status updates; only a rejection stops work.
      if (info.status !== "rejected") return [];
      return [
        {
          type: "rate_limit",
          resetsAt: isoTime(info.resetsAt),
          message: `Claude usage limit reached${str(info.rateLimitType) ? ` (${info.rateLimitType})` : ""}`,
        },
      ];
    }
    default:
      return null;
  }
}

function parseSystem(o: Json): AgentEvent[] | null {
  if (o.subtype === "init") {
    const tools = arr(o.tools).filter((t): t is string => typeof t === "string");
    return [{ type: "init", sessionId: str(o.session_id), model: str(o.model), tools }];
  }
  if (o.subtype === "api_retry") {
    // The CLI retries on its own (CLAUDE_CODE_MAX_RETRIES, default 10) and says so here.
    const status = optNum(o.error_status);
    const delay = optNum(o.retry_delay_ms);
    const message = `API ${status ?? "error"} (${str(o.error) ?? "unknown"}); retry ${num(o.attempt)}/${num(o.max_retries)}`;
    if (status === 429 || o.error === "rate_limit") {
      return [
        {
          type: "rate_limit",
          retryAfterSeconds: delay === undefined ? undefined : Math.round(delay / 100) / 10,
          message,
        },
      ];
    }
    return [{ type: "error", message }];
  }
  return null;
}

function parseAssistant(o: Json): AgentEvent[] {
  const message = obj(o.message);
  const events: AgentEvent[] = [];
  for (const b of arr(message.content).map(obj)) {
    if (b.type === "text" && typeof b.text === "string") events.push({ type: "text", text: b.text });
    else if (b.type === "tool_use")
      events.push({ type: "tool_use", name: str(b.name) ?? "", input: b.input, id: str(b.id) });
  }
  const u = obj(message.usage);
  // Synthetic messages (model "<synthetic>") carry API errors as text and zero usage.
  if (Object.keys(u).length > 0 && message.model !== "<synthetic>") {
    events.push({
      type: "usage",
      id: str(message.id),
      usage: {
        input: num(u.input_tokens),
        output: num(u.output_tokens),
        cacheRead: num(u.cache_read_input_tokens),
        cacheWrite: num(u.cache_creation_input_tokens),
      },
    });
  }
  if (typeof o.error === "string" && o.error !== "rate_limit") {
    events.push({ type: "error", message: contentText(message.content) || o.error });
  }
  return events;
}

/**
 * Totals from the final `result`: `modelUsage` summed over models (it also counts side requests,
 * which the top-level `usage` leaves out), `total_cost_usd`, `num_turns`, `duration_ms`.
 */
function parseResult(o: Json): AgentEvent[] {
  const modelUsage = obj(o.modelUsage);
  const models = Object.entries(modelUsage).map(([name, v]) => ({ name, u: obj(v) }));
  let usage: Partial<TokenUsage>;
  let model = "";
  let cost: number | null = optNum(o.total_cost_usd) ?? null;
  if (models.length > 0) {
    usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
    let modelCost = 0;
    for (const { u } of models) {
      usage.input = (usage.input ?? 0) + num(u.inputTokens);
      usage.output = (usage.output ?? 0) + num(u.outputTokens);
      usage.cacheRead = (usage.cacheRead ?? 0) + num(u.cacheReadInputTokens);
      usage.cacheWrite = (usage.cacheWrite ?? 0) + num(u.cacheCreationInputTokens);
      modelCost += num(u.costUSD);
    }
    cost ??= modelCost;
    // The model that produced the most output did the work; side requests use smaller ones.
    model = models.reduce((a, b) => (num(b.u.outputTokens) > num(a.u.outputTokens) ? b : a)).name;
  } else {
    const u = obj(o.usage);
    usage = {
      input: num(u.input_tokens),
      output: num(u.output_tokens),
      cacheRead: num(u.cache_read_input_tokens),
      cacheWrite: num(u.cache_creation_input_tokens),
    };
  }
  const sessionId = str(o.session_id);
  const summary = str(o.result);
  const ok = o.is_error !== true && (o.subtype === undefined || o.subtype === "success");
  const events: AgentEvent[] = [];
  if (o.api_error_status === 429) {
    events.push({ type: "rate_limit", message: summary ?? "API rate limit (429)" });
  } else if (!ok) {
    const errors = arr(o.errors).filter((e): e is string => typeof e === "string");
    events.push({ type: "error", message: summary ?? (errors.join("; ") || `claude: ${String(o.subtype)}`) });
  }
  events.push({
    type: "result",
    ok,
    sessionId,
    summary,
    totals: totals(usage, { costUsd: cost, turns: num(o.num_turns), durationMs: num(o.duration_ms), model }),
  });
  return events;
}
