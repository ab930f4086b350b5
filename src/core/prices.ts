import type { TokenUsage } from "./usage.ts";

// What a model turn costs, from the tokens the gateway read on the wire: the providers' published
// list prices per million tokens (input, output, cache read, cache write; USD). Used for the
// per-task cost ceiling. A model not in the table has no price of its own: reports say so, and the
// ceiling holds it at the highest list price of its provider (see ceilingCostOf).

interface Price {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

const p = (input: number, output: number, cacheRead: number, cacheWrite: number): Price => ({
  input,
  output,
  cacheRead,
  cacheWrite,
});

/**
 * By model id: an id is priced by an entry it starts with when what follows is nothing, a date
 * (`-20250514`, `-2025-08-07`), `-latest` or a `-preview...`/`-exp...` tag; any other variant
 * (`o3-pro`, `gpt-5-pro`, `o3-deep-research`) is a different model with its own price, so it is
 * unpriced unless listed itself, never charged its base model's price. Anthropic: cache write is the
 * 5-minute write (1.25x input), cache read 0.1x input. OpenAI: cached input as published; no separate
 * cache-write charge; models without prompt caching (the -pro ones) charge cached input as input.
 * Gemini: the prices for prompts up to 200k tokens.
 * Sources: https://docs.claude.com/en/docs/about-claude/pricing, https://platform.openai.com/docs/pricing,
 * https://ai.google.dev/gemini-api/docs/pricing.
 */
const PRICES: ReadonlyArray<readonly [prefix: string, price: Price]> = [
  // Opus 4 and 4.1 (claude-opus-4-20250514, claude-opus-4-1-...) and Claude 3 Opus; later Opus by family.
  ["claude-opus-4-1", p(15, 75, 1.5, 18.75)],
  ["claude-opus-4-0", p(15, 75, 1.5, 18.75)],
  ["claude-opus-4", p(15, 75, 1.5, 18.75)],
  ["claude-3-opus", p(15, 75, 1.5, 18.75)],
  ["claude-3-5-haiku", p(0.8, 4, 0.08, 1)],
  ["claude-3-haiku", p(0.25, 1.25, 0.03, 0.3)],
  ["gpt-5-pro", p(15, 120, 15, 0)],
  ["gpt-5-mini", p(0.25, 2, 0.025, 0)],
  ["gpt-5-nano", p(0.05, 0.4, 0.005, 0)],
  ["gpt-5-codex-mini", p(0.25, 2, 0.025, 0)],
  ["gpt-5-codex", p(1.25, 10, 0.125, 0)],
  ["gpt-5-chat-latest", p(1.25, 10, 0.125, 0)],
  ["gpt-5", p(1.25, 10, 0.125, 0)],
  ["gpt-5.1-codex-mini", p(0.25, 2, 0.025, 0)],
  ["gpt-5.1-codex-max", p(1.25, 10, 0.125, 0)],
  ["gpt-5.1-codex", p(1.25, 10, 0.125, 0)],
  ["gpt-5.1", p(1.25, 10, 0.125, 0)],
  ["codex-mini", p(1.5, 6, 0.375, 0)],
  ["o1-pro", p(150, 600, 150, 0)],
  ["o1-mini", p(1.1, 4.4, 0.55, 0)],
  ["o1", p(15, 60, 7.5, 0)],
  ["o3-pro", p(20, 80, 20, 0)],
  ["o3-mini", p(1.1, 4.4, 0.55, 0)],
  ["o3", p(2, 8, 0.5, 0)],
  ["o4-mini", p(1.1, 4.4, 0.275, 0)],
  ["gpt-4.1-mini", p(0.4, 1.6, 0.1, 0)],
  ["gpt-4.1-nano", p(0.1, 0.4, 0.025, 0)],
  ["gpt-4.1", p(2, 8, 0.5, 0)],
  ["gpt-4o-mini", p(0.15, 0.6, 0.075, 0)],
  ["gpt-4o", p(2.5, 10, 1.25, 0)],
  ["gemini-2.5-pro", p(1.25, 10, 0.31, 0)],
  ["gemini-2.5-flash-lite", p(0.1, 0.4, 0.025, 0)],
  ["gemini-2.5-flash", p(0.3, 2.5, 0.075, 0)],
];

/** What may follow a listed id and still be that model: a date, `-latest`, a preview or experiment tag. */
const SAME_MODEL = /^(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest|-(preview|exp)([-.\w]*)?)?$/;

/**
 * Claude models by family, for ids the table above does not name (newer versions such as
 * `claude-opus-4-8`, `claude-sonnet-5`, and the CLI's aliases): the family's current list price.
 */
const CLAUDE_FAMILIES: ReadonlyArray<readonly [family: string, price: Price]> = [
  ["opus", p(5, 25, 0.5, 6.25)],
  ["sonnet", p(3, 15, 0.3, 3.75)],
  ["haiku", p(1, 5, 0.1, 1.25)],
];

/** The price of `model` (a provider prefix such as `anthropic/` or `models/` is ignored), or undefined. */
export function priceOf(model: string): Price | undefined {
  const id = model
    .trim()
    .toLowerCase()
    .replace(/\[1m\]$/, "");
  const bare = id.slice(id.lastIndexOf("/") + 1);
  return (
    PRICES.find(([prefix]) => bare.startsWith(prefix) && SAME_MODEL.test(bare.slice(prefix.length)))?.[1] ??
    CLAUDE_FAMILIES.find(([family]) => bare.includes(family))?.[1]
  );
}

/** What `usage` of `model` costs in US dollars, or null when Fleet has no price for the model. */
export function costOf(model: string, usage: Partial<TokenUsage>): number | null {
  const price = priceOf(model);
  return price ? priced(price, usage) : null;
}

function priced(price: Price, usage: Partial<TokenUsage>): number {
  const perToken = (n: number | undefined, usdPerMillion: number) => ((n ?? 0) * usdPerMillion) / 1_000_000;
  return (
    perToken(usage.input, price.input) +
    perToken(usage.output, price.output) +
    perToken(usage.cacheRead, price.cacheRead) +
    perToken(usage.cacheWrite, price.cacheWrite)
  );
}

/** The providers (as the gateway names the API it forwards to), by what their model ids look like. */
const PROVIDERS: ReadonlyArray<readonly [provider: string, ids: RegExp]> = [
  ["anthropic", /claude|opus|sonnet|haiku/],
  ["openai", /^(gpt|o\d|codex|chatgpt)/],
  ["gemini", /gemini/],
];

const bareId = (model: string): string => {
  const id = model.trim().toLowerCase();
  return id.slice(id.lastIndexOf("/") + 1);
};

/** Each of the four prices at its highest among `prices`. */
const highest = (prices: readonly Price[]): Price => ({
  input: Math.max(...prices.map((x) => x.input)),
  output: Math.max(...prices.map((x) => x.output)),
  cacheRead: Math.max(...prices.map((x) => x.cacheRead)),
  cacheWrite: Math.max(...prices.map((x) => x.cacheWrite)),
});

const ALL_PRICES = [...PRICES, ...CLAUDE_FAMILIES];

/** The provider a model id names (anthropic, openai, gemini), or undefined. */
export const providerOf = (model: string): string | undefined =>
  PROVIDERS.find(([, ids]) => ids.test(bareId(model)))?.[0];

/**
 * What the per-task dollar ceiling holds `usage` of `model` to: its price, or for a model Fleet has no
 * price for, the highest list price of its provider (the API the request went to, else the one the id
 * names; of any provider when neither is known), each of input, output, cache read and cache write at
 * its highest. An unknown model can then never spend more than the ceiling says; `assumed` says the
 * figure is such a bound, not a cost.
 */
export function ceilingCostOf(
  model: string,
  usage: Partial<TokenUsage>,
  provider?: string,
): { usd: number; assumed: boolean } {
  const own = priceOf(model);
  if (own) return { usd: priced(own, usage), assumed: false };
  const ids = PROVIDERS.find(([name]) => name === (provider ?? providerOf(model)))?.[1];
  const candidates = ids ? ALL_PRICES.filter(([prefix]) => ids.test(prefix)) : ALL_PRICES;
  return { usd: priced(highest(candidates.map(([, price]) => price)), usage), assumed: true };
}
