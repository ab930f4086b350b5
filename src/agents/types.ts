import type { CoderOptions } from "../core/coder-options.ts";
import type { RunTotals, TokenUsage } from "../core/usage.ts";

export type AgentPhase = "plan" | "work";

export interface AgentInvocation {
  prompt: string;
  model: string;
  phase: AgentPhase;
  cwd: string;
  resumeSessionId?: string;
  /** The one credential the agent gets: `name` is the environment variable it is passed in. */
  credential?: { name: string; value: string };
  /** Model API base URL (tests/offline: a scripted server on loopback). */
  modelBaseUrl?: string;
  /** Isolated HOME (and CODEX_HOME) for the agent; keep it to resume a session later. */
  home?: string;
  /** Extra environment for this run (e.g. CLAUDE_CODE_MAX_RETRIES=0); applied after the adapter's own. */
  env?: Record<string, string>;
  /**
   * Fleet runs the agent inside its own sandbox: a CLI that has a sandbox of its own turns it off
   * (Fleet's is the boundary, and nested namespaces are not available on every host).
   */
  sandboxed?: boolean;
  /**
   * The run's network (`proxy`: other hosts only through Fleet's egress proxy; `none`: the model only;
   * `host`, or absent: the host's): a CLI's own web tools follow it (see each adapter).
   */
  network?: "proxy" | "none" | "host";
  /** `coders.<coder>.options` of .github/fleet.yml, already checked for this coder and network. */
  options?: CoderOptions;
}

export interface AgentCommand {
  file: string;
  args: string[];
  /** Only what this coder needs; the runner adds a minimal base (PATH, HOME, LANG, TMPDIR) and nothing else. */
  env: Record<string, string>;
  stdin: "ignore" | { text: string };
  /**
   * Settings files the CLI reads at start (telemetry off, how it authenticates), for CLIs that take
   * such settings from no variable: written before it starts, `path` relative to its private HOME.
   */
  files?: Array<{ path: string; content: string }>;
}

/**
 * A normalized event from one line of an agent's machine output.
 * `error` and `rate_limit` are reports, not verdicts: the run's outcome is the `result` event and
 * the exit code (agents retry on their own and say so).
 */
export type AgentEvent =
  | { type: "init"; sessionId?: string; model?: string; tools?: string[] }
  | { type: "text"; text: string }
  | { type: "tool_use"; name: string; input: unknown; id?: string }
  | { type: "tool_result"; id?: string; isError: boolean; output: string }
  /**
   * Incremental usage for live progress. When `id` is set (one model message), a later usage event
   * with the same id replaces the earlier one instead of adding to it (Claude repeats a message's
   * usage on every content-block line).
   */
  | { type: "usage"; usage: Partial<TokenUsage>; id?: string }
  | { type: "rate_limit"; resetsAt?: string; retryAfterSeconds?: number; message: string }
  | { type: "result"; ok: boolean; totals: RunTotals; sessionId?: string; summary?: string }
  | { type: "error"; message: string }
  | { type: "unknown"; raw: string };

/**
 * One coder: its facts (name, binary, default model, credential variables, upstream and model routes)
 * are the registry's (src/core/coders.ts, through `defineAdapter`); the adapter adds argv and parsing.
 */
export interface AgentAdapter {
  coder: string;
  displayName: string;
  defaultModel: string;
  /** Executable name looked up on PATH, e.g. "claude". */
  binary: string;
  /** Environment variable the coder reads its credential from, e.g. ANTHROPIC_API_KEY. */
  credentialEnv: string;
  /**
   * Other variables the CLI reads a credential from (e.g. CLAUDE_CODE_OAUTH_TOKEN): a configured
   * credential with one of these names travels in it; any other name is a label and travels in
   * `credentialEnv`.
   */
  credentialAliases?: readonly string[];
  /**
   * The model API the CLI talks to by default (an origin). Set for CLIs that take a base URL: their
   * runs go through Fleet's model gateway, and the agent holds a per-run token instead of the
   * credential. Absent: the CLI cannot be pointed elsewhere and is handed its credential itself.
   */
  upstream?: string;
  /**
   * The model API requests the CLI makes (method, path): the gateway forwards these and nothing else,
   * so a run token cannot start batch jobs, upload files or fine-tune on the real credential.
   */
  modelRoutes?: ReadonlyArray<{ method: string; path: RegExp }>;
  command(inv: AgentInvocation): AgentCommand;
  /** One line of stdout -> events. Never throws: anything it cannot read is `{type:"unknown"}`. */
  parseLine(line: string): AgentEvent[];
}
