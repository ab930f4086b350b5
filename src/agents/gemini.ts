import { coderCommand, defineAdapter } from "./adapter.ts";
import { type Json, looksRateLimited, num, obj, str, totals } from "./json-line.ts";
import type { AgentAdapter, AgentCommand, AgentEvent, AgentInvocation } from "./types.ts";

/** The Gemini CLI's user settings, relative to the agent's HOME. */
const SETTINGS_FILE = ".gemini/settings.json";

/**
 * Gemini CLI (`@google/gemini-cli`, run here as 0.61.0), headless:
 * `gemini -p <prompt> --output-format stream-json -m <model> --approval-mode yolo|plan`.
 *
 * Its output (packages/core/src/output/types.ts and stream-json-formatter.ts, as bundled): `init`
 * (session_id, model), `message` (role user|assistant, `delta`), `tool_use` (tool_name, tool_id,
 * parameters), `tool_result` (tool_id, status, output), `error`, and a final `result` (status
 * success|error, `error.message`, `stats`). The CLI exits 1 after a failed result. Resume takes the
 * session id (`--resume <id>`).
 *
 * Settings: the CLI reads no variable for usage statistics or its auth type, so Fleet writes its user
 * settings (~/.gemini/settings.json in the private HOME): usage statistics and telemetry off, no update
 * check, the API key auth type (the user's Google login without a key). (A system settings file, GEMINI_CLI_SYSTEM_SETTINGS_PATH, is skipped
 * when a folder above it is writable by others, as /tmp is.) A repository's own .gemini/settings.json
 * (workspace settings) still overrides these, usage statistics included: the agent, on the shared
 * network, can send anything anyway.
 * GEMINI_CLI_TRUST_WORKSPACE=true, or a headless run in an untrusted folder falls back to approving
 * nothing. The base URL is GOOGLE_GEMINI_BASE_URL and the key GEMINI_API_KEY (sent as x-goog-api-key).
 */
export const geminiAdapter: AgentAdapter = defineAdapter("gemini", {
  command(inv: AgentInvocation) {
    const args = ["-p", inv.prompt, "--output-format", "stream-json", "-m", inv.model];
    args.push("--approval-mode", inv.phase === "plan" ? "plan" : "yolo");
    if (inv.resumeSessionId) args.push("--resume", inv.resumeSessionId);
    const own: Record<string, string> = {
      GEMINI_CLI_NO_RELAUNCH: "true",
      GEMINI_CLI_TRUST_WORKSPACE: "true",
      GEMINI_TELEMETRY_ENABLED: "false",
    };
    const files: AgentCommand["files"] = [
      { path: SETTINGS_FILE, content: JSON.stringify(geminiSettings(inv)) },
    ];
    return { ...coderCommand("gemini", inv, args, own), files };
  },
  parse: parseGemini,
});

/** Fleet's settings: nothing reported home, no update check; the API key when the run has one. */
function geminiSettings(inv: AgentInvocation) {
  return {
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { disableAutoUpdate: true, disableUpdateNag: true, enableAutoUpdate: false },
    // Google Search grounding runs at the provider, outside Fleet's egress proxy: off unless the
    // network is the host's; web_fetch goes through the proxy, and is off with no network.
    ...(inv.network === "proxy" || inv.network === "none"
      ? {
          tools: {
            exclude: inv.network === "none" ? ["google_web_search", "web_fetch"] : ["google_web_search"],
          },
        }
      : {}),
    // Without a key the run uses the user's Google login (`home: inherit` shows it its oauth_creds.json).
    security: {
      auth: { selectedType: inv.credential || inv.modelBaseUrl ? "gemini-api-key" : "oauth-personal" },
    },
  };
}

function failure(message: string): AgentEvent {
  return looksRateLimited(message) ? { type: "rate_limit", message } : { type: "error", message };
}

function parseGemini(o: Json): AgentEvent[] | null {
  switch (o.type) {
    case "init":
      return [{ type: "init", sessionId: str(o.session_id), model: str(o.model) }];
    case "message":
      // The user's own prompt is echoed back as a message; only the assistant's text is news.
      return o.role === "assistant" ? [{ type: "text", text: str(o.content) ?? "" }] : [];
    case "tool_use":
      return [{ type: "tool_use", name: str(o.tool_name) ?? "", input: o.parameters, id: str(o.tool_id) }];
    case "tool_result":
      return [
        {
          type: "tool_result",
          id: str(o.tool_id),
          isError: o.status === "error",
          output: str(o.output) ?? str(obj(o.error).message) ?? "",
        },
      ];
    case "error":
      // Also warnings (severity "warning", e.g. a loop detected): a report; the result is the verdict.
      return [failure(str(o.message) ?? "gemini: error")];
    case "result":
      return parseResult(o);
    default:
      return null;
  }
}

/**
 * `stats`: input_tokens is the prompt including its cached part (`cached`), output_tokens the
 * candidates only. Thoughts are not listed but are in total_tokens (with tool-use prompt tokens, which
 * Gemini counts alike): Fleet counts them as reasoning, inside output, as for Codex.
 */
function parseResult(o: Json): AgentEvent[] {
  const s = obj(o.stats);
  const cached = num(s.cached);
  const reasoning = Math.max(0, num(s.total_tokens) - num(s.input_tokens) - num(s.output_tokens));
  const usage = {
    input: s.input !== undefined ? num(s.input) : Math.max(0, num(s.input_tokens) - cached),
    output: num(s.output_tokens) + reasoning,
    cacheRead: cached,
    reasoning,
  };
  const ok = o.status !== "error";
  const events: AgentEvent[] = [];
  const message = ok ? undefined : (str(obj(o.error).message) ?? "gemini: run failed");
  if (message) events.push(failure(message));
  const models = Object.keys(obj(s.models));
  events.push({
    type: "result",
    ok,
    totals: totals(usage, { durationMs: num(s.duration_ms), model: models.length === 1 ? models[0] : "" }),
    sessionId: str(o.session_id),
    ...(message ? { summary: message } : {}),
  });
  return events;
}
