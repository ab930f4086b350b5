import type { TaskContext } from "./task.ts";
import type { TokenUsage } from "./usage.ts";

// How full an agent's context is: the last model turn's prompt (input + cache read + cache write:
// everything the model read for that turn) against the model's context window.

/** A model's context window in tokens, and whether Fleet knows it or assumed it. */
export interface ContextWindow {
  tokens: number;
  known: boolean;
}

/**
 * Published context windows (input tokens a request may carry), by model id prefix, most specific
 * first. Claude: every Claude 3, 4 and 4.5 model takes 200k (Sonnet 4 and 4.5 take 1M with the
 * 1M-context beta, which Claude Code asks for when the model ends in `[1m]`). OpenAI: the GPT-5 family
 * takes 272k input tokens (of its 400k, 128k are kept for output; codex-cli's model table says 272k),
 * o-series 200k, GPT-4.1 1M, GPT-4o 128k. Gemini 1.5 Pro 2M, the other 1.5/2.x/3 models 1M.
 */
const WINDOWS: ReadonlyArray<readonly [prefix: string, tokens: number]> = [
  ["claude-", 200_000],
  ["opus", 200_000],
  ["sonnet", 200_000],
  ["haiku", 200_000],
  ["gpt-5", 272_000],
  ["codex-mini", 200_000],
  ["o1-mini", 128_000],
  ["o1", 200_000],
  ["o3", 200_000],
  ["o4-mini", 200_000],
  ["gpt-4.1", 1_047_576],
  ["gpt-4o", 128_000],
  ["gpt-oss", 131_072],
  ["gemini-1.5-pro", 2_097_152],
  ["gemini-", 1_048_576],
];

/**
 * The fallback for a model not in the table: 128k, the smallest window of the models above, so an
 * unknown model's pressure is overstated rather than missed (shown as assumed on the tracking comment).
 */
export const FALLBACK_CONTEXT_WINDOW = 128_000;
const ONE_MILLION = 1_000_000;

/** The context window of `model` (a provider prefix such as `anthropic/` or `models/` is ignored). */
export function contextWindowOf(model: string): ContextWindow {
  const id = model.trim().toLowerCase();
  // Claude Code's `sonnet[1m]` / `claude-sonnet-4-5[1m]`: the 1M-context beta.
  if (id.endsWith("[1m]")) return { tokens: ONE_MILLION, known: true };
  const bare = id.slice(id.lastIndexOf("/") + 1);
  const found = WINDOWS.find(([prefix]) => bare.startsWith(prefix));
  return found ? { tokens: found[1], known: true } : { tokens: FALLBACK_CONTEXT_WINDOW, known: false };
}

/**
 * The model id a turn's context is measured by: the answer's, marked `[1m]` when the 1M-context beta
 * was asked for, which the answer's id does not say (Claude answers `claude-sonnet-4-5-...` to a
 * `sonnet[1m]` run): by the task's configured model (`sonnet[1m]`) or the request's
 * `anthropic-beta: context-1m-...` header.
 */
export function contextModelOf(
  answered: string,
  asked: { configured?: string; anthropicBeta?: string | string[] },
): string {
  if (answered.trim().toLowerCase().endsWith("[1m]")) return answered;
  const beta = [asked.anthropicBeta ?? []].flat().join(",");
  const oneMillion =
    (asked.configured ?? "").trim().toLowerCase().endsWith("[1m]") ||
    beta.split(",").some((b) => b.trim().toLowerCase().startsWith("context-1m-"));
  return oneMillion ? `${answered}[1m]` : answered;
}

/** One model turn's context: everything it read (input, cache read, cache write); output is not in it yet. */
export const turnContextTokens = (u: Partial<TokenUsage>): number =>
  (u.input ?? 0) + (u.cacheRead ?? 0) + (u.cacheWrite ?? 0);

/** The task's context after a turn of `model` that read `usage`, at `at` (RFC3339). */
export function contextAfterTurn(model: string, usage: Partial<TokenUsage>, at: string): TaskContext {
  const window = contextWindowOf(model);
  return {
    tokens: turnContextTokens(usage),
    window: window.tokens,
    at,
    ...(window.known ? {} : { windowAssumed: true }),
  };
}

/** How full the context is, in whole percent (rounded down, so 100% means the window is full). */
export const contextPercent = (c: Pick<TaskContext, "tokens" | "window">): number =>
  c.window > 0 ? Math.floor((c.tokens * 100) / c.window) : 0;

/**
 * Why a run must stop under `max_context_pct` (1-100; absent or 0: no limit), or undefined: the last
 * turn read more than that share of the window.
 */
export function overContextLimit(c: TaskContext, maxPct: number | undefined): string | undefined {
  if (!maxPct || c.tokens * 100 <= maxPct * c.window) return undefined;
  const assumed = c.windowAssumed ? " (assumed: the model is not in Fleet's table)" : "";
  return `stopped: the last turn's context was ${formatTokens(c.tokens)} tokens, ${contextPercent(c)}% of the model's ${formatTokens(c.window)} window${assumed}, over max_context_pct ${maxPct}`;
}

/** 950, 12.3k, 142k, 1.05M: token counts as a person reads them. */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 10_000) return `${trim((n / 1000).toFixed(1))}k`;
  if (n < 999_500) return `${Math.round(n / 1000)}k`;
  return `${trim((n / ONE_MILLION).toFixed(2))}M`;
}

const trim = (s: string) => s.replace(/\.?0+$/, "");
