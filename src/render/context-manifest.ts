// What an agent loads before it works (`fleet task <id> knowledge`), measured: the data and its table; pure.

export interface ContextSource {
  kind: "memory" | "skill" | "mcp" | "prompt";
  /** Relative to the worktree for repository files, `~/...` for the agent's home, "(prompt)" for Fleet's prompt. */
  path: string;
  bytes: number;
  /** Estimated: characters / 4, the usual rule of thumb for English text and code (no tokenizer offline). */
  tokens: number;
  sha256: string;
  /** The first source with the same content, when this one repeats it. */
  duplicateOf?: string;
}

export interface ContextManifest {
  coder: string;
  sources: ContextSource[];
  totalTokens: number;
  /** Tokens spent on repeated content, per turn. */
  duplicateTokens: number;
  suggestions: string[];
  /** Filled after the run: what the first turn really cost (input + cache read + cache write). */
  firstTurnTokens?: number;
}

export function renderContextManifest(m: ContextManifest): string {
  const rows = m.sources.map(
    (s) =>
      `| ${s.kind} | \`${s.path}\` | ${s.tokens.toLocaleString("en-US")} | ${s.duplicateOf ? `⚠️ duplicate of \`${s.duplicateOf}\`` : ""} |`,
  );
  const lines = [
    `### Context loaded (${m.coder}): ~${m.totalTokens.toLocaleString("en-US")} tokens per turn, estimated`,
    "",
    "| Kind | Source | Tokens (est.) | |",
    "|---|---|---:|---|",
    ...rows,
  ];
  if (m.firstTurnTokens !== undefined) {
    lines.push(
      "",
      `The first turn really cost ${m.firstTurnTokens.toLocaleString("en-US")} tokens (input, cache read and cache write).`,
    );
  }
  if (m.suggestions.length) lines.push("", ...m.suggestions.map((s) => `- ${s}`));
  return lines.join("\n");
}
