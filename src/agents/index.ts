import { CODER_NAMES, type CoderName } from "../core/coders.ts";
import { agyAdapter } from "./agy.ts";
import { claudeAdapter } from "./claude.ts";
import { codexAdapter } from "./codex.ts";
import { geminiAdapter } from "./gemini.ts";
import { opencodeAdapter } from "./opencode.ts";
import type { AgentAdapter } from "./types.ts";

export type * from "./types.ts";

/**
 * Every coder Fleet can run, by label name (`fleet:<coder>`): one adapter per coder of the registry
 * (src/core/coders.ts), which the type checks. Adding one: an entry there, a file and a line here.
 */
export const adapters: Record<string, AgentAdapter> = {
  claude: claudeAdapter,
  codex: codexAdapter,
  agy: agyAdapter,
  gemini: geminiAdapter,
  opencode: opencodeAdapter,
} satisfies Record<CoderName, AgentAdapter>;

/** The coders' names, in registry order (a copy: callers may sort it). */
export const knownCoders: string[] = [...CODER_NAMES];

export function getAdapter(coder: string): AgentAdapter | undefined {
  return Object.hasOwn(adapters, coder) ? adapters[coder] : undefined;
}
