import { agyAdapter } from "./agy.ts";
import { claudeAdapter } from "./claude.ts";
import { codexAdapter } from "./codex.ts";
import { geminiAdapter } from "./gemini.ts";
import type { AgentAdapter } from "./types.ts";

export type * from "./types.ts";

/** Every coder Fleet can run, by label name (`fleet:<coder>`). Adding one: a file and a line here. */
export const adapters: Record<string, AgentAdapter> = Object.fromEntries(
  [claudeAdapter, codexAdapter, agyAdapter, geminiAdapter].map((a) => [a.coder, a]),
);

export const knownCoders: string[] = Object.keys(adapters);

export function getAdapter(coder: string): AgentAdapter | undefined {
  return Object.hasOwn(adapters, coder) ? adapters[coder] : undefined;
}
