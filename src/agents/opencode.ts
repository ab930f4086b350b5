import { CODERS } from "../core/coders.ts";
import { coderCommand, defineAdapter } from "./adapter.ts";
import { type Json, looksRateLimited, num, obj, str } from "./json-line.ts";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "./types.ts";

/** The provider Fleet configures when it points opencode at its own base URL. */
const PROVIDER = "fleet";

/**
 * opencode (`opencode-ai`, run here as 1.18.33), headless: `opencode run --format json`, the prompt
 * on stdin. Plan phase: its read-only `plan` agent; work phase: the default `build` agent with every
 * permission allowed (a headless run rejects whatever would ask; Fleet's sandbox is the boundary).
 *
 * opencode takes no base URL from a variable: its config (OPENCODE_CONFIG_CONTENT, the JSON of an
 * opencode.json) declares a provider `fleet` on the Anthropic Messages API (`@ai-sdk/anthropic`,
 * bundled in the binary) whose `baseURL` is the gateway and whose key is read from the credential's
 * variable (`{env:NAME}`), so the model is named `fleet/<model>`. A model given as `provider/model`
 * is passed as it is (the user's own providers, e.g. with `home: inherit`).
 *
 * Nothing leaves for opencode's own services: no models.dev fetch, no update check, no sharing, no LSP
 * downloads, no default plugins, and npm offline (it installs `@opencode-ai/plugin` into each config
 * folder it may write).
 *
 * Output, one JSON object a line (packages/opencode/src/cli/cmd/run.ts): `step_start`, `text`
 * (part.text), `tool_use` (part.tool, part.callID, part.state {status completed|error, input, output,
 * error}), `step_finish` (part.tokens {input, output, reasoning, cache {read, write}}, part.cost) per
 * model message, and `error` (error {name, data.message}); the run exits 1 after an error. There is no
 * final summary line: the run's totals are its step_finish figures added up (`input` excludes the cache,
 * `reasoning` is apart from `output`).
 */
export const opencodeAdapter: AgentAdapter = defineAdapter("opencode", {
  command(inv: AgentInvocation) {
    const model = inv.model.includes("/") ? inv.model : `${PROVIDER}/${inv.model}`;
    const args = ["run", "--format", "json", "-m", model];
    if (inv.phase === "plan") args.push("--agent", "plan");
    if (inv.resumeSessionId) args.push("--session", inv.resumeSessionId);
    const own: Record<string, string> = {
      OPENCODE_CONFIG_CONTENT: JSON.stringify(opencodeConfig(inv)),
      OPENCODE_DISABLE_AUTOUPDATE: "true",
      OPENCODE_DISABLE_SHARE: "true",
      OPENCODE_DISABLE_MODELS_FETCH: "true",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "true",
      OPENCODE_DISABLE_DEFAULT_PLUGINS: "true",
      npm_config_offline: "true",
    };
    return coderCommand("opencode", inv, args, own);
  },
  parse: parseOpencode,
});

/** opencode.json for the run: no sharing or updates, permissions, and the `fleet` provider when Fleet names the model API. */
function opencodeConfig(inv: AgentInvocation) {
  const config: Record<string, unknown> = {
    $schema: "https://opencode.ai/config.json",
    autoupdate: false,
    share: "disabled",
  };
  if (inv.phase === "work") {
    // webfetch goes through Fleet's egress proxy (HTTPS_PROXY); with no network it is refused.
    const webfetch = inv.network === "none" ? "deny" : "allow";
    config.permission = { edit: "allow", bash: "allow", webfetch, external_directory: "allow" };
  }
  if (inv.modelBaseUrl || inv.credential) {
    const keyEnv = inv.credential?.name ?? CODERS.opencode.credential.env;
    const root = (inv.modelBaseUrl ?? CODERS.opencode.gateway!.upstream).replace(/\/+$/, "");
    const model = inv.model.includes("/") ? inv.model.split("/").slice(1).join("/") : inv.model;
    config.provider = {
      [PROVIDER]: {
        npm: "@ai-sdk/anthropic",
        name: "Fleet",
        options: { baseURL: root.endsWith("/v1") ? root : `${root}/v1`, apiKey: `{env:${keyEnv}}` },
        models: { [model]: { name: model, tool_call: true } },
      },
    };
  }
  return config;
}

function failure(message: string): AgentEvent {
  return looksRateLimited(message) ? { type: "rate_limit", message } : { type: "error", message };
}

function parseOpencode(o: Json): AgentEvent[] | null {
  const part = obj(o.part);
  switch (o.type) {
    case "step_start":
      return [{ type: "init", sessionId: str(o.sessionID) }];
    case "text":
      return [{ type: "text", text: str(part.text) ?? "" }];
    case "reasoning":
      return [];
    case "tool_use":
      return toolEvents(part);
    case "step_finish":
      return [stepUsage(part)];
    case "error": {
      const error = obj(o.error);
      const data = obj(error.data);
      const status = num(data.statusCode);
      const message = str(data.message) ?? str(error.message) ?? str(error.name) ?? "opencode: error";
      return [failure(status === 429 ? `429: ${message}` : message)];
    }
    default:
      return null;
  }
}

function toolEvents(part: Json): AgentEvent[] {
  const state = obj(part.state);
  const id = str(part.callID) ?? str(part.id);
  const events: AgentEvent[] = [{ type: "tool_use", name: str(part.tool) ?? "", input: state.input, id }];
  if (state.status === "completed" || state.status === "error") {
    const isError = state.status === "error";
    events.push({
      type: "tool_result",
      id,
      isError,
      output: str(isError ? state.error : state.output) ?? "",
    });
  }
  return events;
}

/** One model message's figures: Fleet counts reasoning inside output, as opencode's `total` does not. */
function stepUsage(part: Json): AgentEvent {
  const tokens = obj(part.tokens);
  const cache = obj(tokens.cache);
  const reasoning = num(tokens.reasoning);
  return {
    type: "usage",
    id: str(part.messageID) ?? str(part.id),
    usage: {
      input: num(tokens.input),
      output: num(tokens.output) + reasoning,
      cacheRead: num(cache.read),
      cacheWrite: num(cache.write),
      reasoning,
    },
  };
}
