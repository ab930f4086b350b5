import { CODERS, type CoderName } from "../core/coders.ts";
import { type Json, safeParse } from "./json-line.ts";
import type { AgentAdapter, AgentCommand, AgentEvent, AgentInvocation } from "./types.ts";

/** What an adapter adds to the registry's facts: how to call the CLI and how to read one line of its output. */
export interface AdapterParts {
  command(inv: AgentInvocation): AgentCommand;
  /** One JSON object of output -> events; null when the line means nothing known (it becomes `unknown`). */
  parse(o: Json): AgentEvent[] | null;
}

/** The adapter of a registered coder: its facts from src/core/coders.ts, its argv and parsing from `parts`. */
export function defineAdapter(name: CoderName, parts: AdapterParts): AgentAdapter {
  const facts = CODERS[name];
  const adapter: AgentAdapter = {
    coder: facts.name,
    displayName: facts.displayName,
    defaultModel: facts.defaultModel,
    binary: facts.binary,
    credentialEnv: facts.credential.env,
    credentialAliases: facts.credential.aliases,
    command: parts.command,
    parseLine: (line) => safeParse(line, parts.parse),
  };
  if (facts.gateway) {
    adapter.upstream = facts.gateway.upstream;
    adapter.modelRoutes = facts.gateway.routes;
  }
  return adapter;
}

/**
 * The command line for a coder: its binary with `args`, and its environment — the CLI's own settings,
 * the base URL where it reads one from a variable, the credential, the private HOME (in each of
 * `homeVariables`), then the run's extras. The prompt goes on stdin when the coder reads it there.
 */
export function coderCommand(
  name: CoderName,
  inv: AgentInvocation,
  args: string[],
  own: Record<string, string> = {},
  homeVariables: readonly string[] = ["HOME"],
): AgentCommand {
  const facts = CODERS[name];
  const env: Record<string, string> = { ...own };
  const baseUrlVariable = facts.gateway?.variable;
  if (inv.modelBaseUrl && baseUrlVariable) env[baseUrlVariable] = inv.modelBaseUrl;
  if (inv.credential) env[inv.credential.name] = inv.credential.value;
  if (inv.home) for (const v of homeVariables) env[v] = inv.home;
  Object.assign(env, inv.env);
  const stdin = facts.promptOn === "stdin" ? { text: inv.prompt } : ("ignore" as const);
  return { file: facts.binary, args, env, stdin };
}
