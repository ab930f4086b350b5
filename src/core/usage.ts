/** Token figures of one agent run, normalized across coders. */
export interface TokenUsage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  /** Reasoning tokens, where the coder reports them separately (Codex). Already counted in `output`. */
  reasoning: number;
}

/** What a finished (or stopped) run cost, as the agent itself reported it. */
export interface RunTotals {
  usage: TokenUsage;
  /** Cost in US dollars as the agent reported it; null when the agent reports none (Codex). */
  costUsd: number | null;
  turns: number;
  durationMs: number;
  model: string;
  /** Name (never the value) of the credential that did the work. */
  credential?: string;
}

export const emptyUsage = (): TokenUsage => ({
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  reasoning: 0,
});

export function addUsage(a: TokenUsage, b: Partial<TokenUsage>): TokenUsage {
  return {
    input: a.input + (b.input ?? 0),
    output: a.output + (b.output ?? 0),
    cacheRead: a.cacheRead + (b.cacheRead ?? 0),
    cacheWrite: a.cacheWrite + (b.cacheWrite ?? 0),
    reasoning: a.reasoning + (b.reasoning ?? 0),
  };
}

/** Every token the model processed or produced: what a budget counts. */
export const totalTokens = (u: TokenUsage): number => u.input + u.output + u.cacheRead + u.cacheWrite;

/** Two runs (e.g. a plan phase and its work phase) as one: figures added, the later run's model. */
export function combineTotals(a: RunTotals | undefined, b: RunTotals | undefined): RunTotals | undefined {
  if (!a || !b) return a ?? b;
  return {
    usage: addUsage(a.usage, b.usage),
    costUsd: a.costUsd === null && b.costUsd === null ? null : (a.costUsd ?? 0) + (b.costUsd ?? 0),
    turns: a.turns + b.turns,
    durationMs: a.durationMs + b.durationMs,
    model: b.model || a.model,
    ...((b.credential ?? a.credential) ? { credential: b.credential ?? a.credential } : {}),
  };
}
