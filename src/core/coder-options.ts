import { z } from "zod";
import type { NetworkSetting } from "./network-policy.ts";

// `coders.<coder>.options` in .github/fleet.yml: the options of a coder's CLI Fleet knows how to pass
// without widening what the agent reaches. Checked per coder (an option its CLI cannot take is an
// error, not ignored) and against the run's network.

/** A tool name, or a Claude permission rule such as `Bash(npm test:*)` or `mcp__server__tool`. */
const TOOL_RULE = /^[A-Za-z][A-Za-z0-9_-]{0,127}(\([^\n()]{1,200}\))?$/;
const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

const mcpServer = z.union([
  z.strictObject({
    command: z.string().trim().min(1).max(500),
    args: z.array(z.string().max(2000)).max(50).optional(),
    env: z.record(z.string().regex(ENV_NAME), z.string().max(2000)).optional(),
  }),
  z.strictObject({
    url: z.url({ protocol: /^https?$/ }),
    type: z.enum(["http", "sse"]).optional(),
  }),
]);
export type McpServer = z.infer<typeof mcpServer>;

export const CODER_OPTIONS_SCHEMA = z.strictObject({
  max_turns: z.number().int().min(1).max(10_000).optional(),
  allowed_tools: z.array(z.string().regex(TOOL_RULE)).max(100).optional(),
  disallowed_tools: z.array(z.string().regex(TOOL_RULE)).max(100).optional(),
  append_system_prompt: z.string().trim().min(1).max(20_000).optional(),
  mcp_servers: z
    .record(z.string().regex(SERVER_NAME), mcpServer)
    .refine((r) => Object.keys(r).length <= 20)
    // `fleet` is Fleet's own server (the agent's ask_human tool).
    .refine((r) => !Object.keys(r).some((k) => k.toLowerCase() === "fleet"), {
      message: "the MCP server name `fleet` is Fleet's own (its ask_human tool); name yours otherwise",
    })
    .optional(),
});
export type CoderOptions = z.infer<typeof CODER_OPTIONS_SCHEMA>;
export type CoderOptionName = keyof CoderOptions;
export const CODER_OPTION_NAMES = Object.keys(CODER_OPTIONS_SCHEMA.shape) as CoderOptionName[];

export const CODER_OPTIONS_FORM =
  "a mapping of max_turns (a whole number from 1), allowed_tools and disallowed_tools (lists of tool names or rules such as Bash(npm test:*)), append_system_prompt (text) and mcp_servers (name: {command, args, env} or {url})";

/** Why a coder's CLI cannot take an option, per coder; an option not listed is taken (claude takes all). */
const CANNOT: Readonly<Record<string, Partial<Record<CoderOptionName, string>>>> = {
  claude: {},
  codex: {
    max_turns: "codex exec has no flag that limits its turns",
    allowed_tools: "codex exec has no per-tool allow list (its tools follow its sandbox)",
    disallowed_tools: "codex exec has no per-tool deny list",
  },
  gemini: {
    max_turns: "the Gemini CLI has no flag that limits its turns in a headless run",
    allowed_tools: "Fleet does not yet pass the Gemini CLI a tool allow list",
    disallowed_tools: "Fleet does not yet pass the Gemini CLI a tool deny list",
    append_system_prompt: "the Gemini CLI takes no appended system prompt",
    mcp_servers: "Fleet does not yet write the Gemini CLI's MCP server settings",
  },
  opencode: {
    max_turns: "opencode run has no flag that limits its turns",
    allowed_tools: "opencode run has no per-run tool allow list",
    disallowed_tools: "opencode run has no per-run tool deny list",
    append_system_prompt: "opencode run takes no appended system prompt",
    mcp_servers: "Fleet does not yet write opencode's MCP server settings",
  },
};

/** The bare tool name of a rule: `Bash(npm test:*)` is `Bash`. */
export const toolName = (rule: string): string => rule.replace(/\(.*$/, "");

/** Tools that reach past the egress proxy or the network policy: by network, the ones refused. */
export function toolsRefusedOn(network: "proxy" | "none" | "host" | undefined): string[] {
  if (network === undefined || network === "host") return [];
  // WebSearch runs at the model provider, outside Fleet's proxy; WebFetch needs some network.
  return network === "none" ? ["WebSearch", "WebFetch"] : ["WebSearch"];
}

/** The mode of a network setting (`proxy` with an allowlist is still `proxy`). */
const modeOf = (network: NetworkSetting): "proxy" | "none" | "host" =>
  typeof network === "string" ? network : "proxy";

/**
 * The problems of one coder's options: each as [option path under `options`, message]. Empty when its
 * CLI takes them all under `network`.
 */
export function coderOptionProblems(
  coder: string,
  options: CoderOptions,
  network: NetworkSetting,
): Array<[string, string]> {
  const problems: Array<[string, string]> = [];
  const cannot = CANNOT[coder];
  for (const name of CODER_OPTION_NAMES) {
    if (options[name] === undefined) continue;
    const why = cannot ? cannot[name] : `Fleet does not know how to pass ${name} to coder "${coder}"`;
    if (why)
      problems.push([
        name,
        `${coder} cannot honour ${name}: ${why}. Remove it from coders.${coder}.options.`,
      ]);
  }
  const mode = modeOf(network);
  const refused = toolsRefusedOn(mode);
  for (const rule of options.allowed_tools ?? []) {
    if (refused.includes(toolName(rule)))
      problems.push([
        "allowed_tools",
        `${toolName(rule)} reaches past the network policy (network: ${mode}); it is allowed only with network: host.`,
      ]);
  }
  for (const [name, server] of Object.entries(options.mcp_servers ?? {})) {
    if ("url" in server && mode !== "host")
      problems.push([
        `mcp_servers.${name}`,
        `a remote MCP server (url) is reached outside the sandbox's network policy (network: ${mode}); use a local server (command) or set network: host.`,
      ]);
  }
  return problems;
}
