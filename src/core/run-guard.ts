import { CONFIG_FIELDS } from "./config-fields.ts";
import { contextAfterTurn, overContextLimit, turnContextTokens } from "./context-windows.ts";
import { ceilingCostOf } from "./prices.ts";
import type { TaskContext } from "./task.ts";
import { addUsage, emptyUsage, type TokenUsage, totalTokens } from "./usage.ts";

// The gateway's watch over one agent run, as pure decisions on what the wire showed: the per-task
// ceilings (refuse the request that would pass one), runaway agents (the same tool call again and
// again, turns that change nothing) and the context window (max_context_pct). The worker feeds it each
// response's turn and, before each request, whether the worktree changed since the last one.

/** What stops a run; 0 or absent turns a limit off. */
export interface GuardLimits {
  /** Per-task token ceiling (input + output + cache read + cache write). */
  tokens?: number;
  /**
   * Per-task cost ceiling in US dollars. Turns of a model Fleet has no price for are held at the highest
   * list price of its provider (see ceilingCostOf), so the ceiling holds for any model.
   */
  usd?: number;
  /** Stop when one tool call with the same input has been asked for this many times with no change to the worktree. */
  repeatedToolCalls?: number;
  /** Stop after this many turns with tool calls in a row that changed nothing in the worktree (work phase). */
  idleTurns?: number;
  /** Stop when a turn read more than this share (percent) of the model's context window. */
  maxContextPct?: number;
}

/** Runaway detection as it is on by default (`runaway:` in .github/fleet.yml changes it). */
export const DEFAULT_RUN_LIMITS = {
  repeatedToolCalls: CONFIG_FIELDS.runaway.group.repeated_tool_calls.default,
  idleTurns: CONFIG_FIELDS.runaway.group.idle_turns.default,
};

/** A model turn as the gateway read it. */
export interface GuardTurn {
  model: string;
  /** The API it went to (anthropic, openai, gemini): prices a model with no price of its own. */
  provider?: string;
  usage: TokenUsage;
  toolCalls: ReadonlyArray<{ name: string; input: string }>;
  /** RFC3339. */
  at: string;
}

export interface GuardState {
  usage: TokenUsage;
  /** What the turns cost at their models' prices (a model with no price adds nothing). */
  costUsd: number;
  /** What the cost ceiling holds the task to: `costUsd`, with unpriced turns at their provider's highest price. */
  heldUsd: number;
  /** Some turn's model had no price: `costUsd` is a lower bound, `heldUsd` an upper one. */
  unpriced: boolean;
  turns: number;
  /** The last turn that read a prompt: what the next one reads at least (its prompt and its answer). */
  last?: { context: number; output: number; heldUsd: number };
  /** Tool calls (name + input) asked for since the worktree last changed, and how often. */
  calls: Readonly<Record<string, number>>;
  /** Turns with tool calls in a row that the worktree did not change after. */
  idleTurns: number;
  context?: TaskContext;
  /** Why the run must stop, once it must. */
  stop?: string;
}

/** A run's guard before its first turn; `earlier` is what the task spent before it (earlier runs and phases). */
export function newGuard(earlier?: { usage?: TokenUsage; costUsd?: number | null }): GuardState {
  return {
    usage: earlier?.usage ? { ...earlier.usage } : emptyUsage(),
    costUsd: earlier?.costUsd ?? 0,
    heldUsd: earlier?.costUsd ?? 0,
    unpriced: false,
    turns: 0,
    calls: {},
    idleTurns: 0,
  };
}

const n = (v: number) => v.toLocaleString("en-US");
const usd = (v: number) => `$${v.toFixed(2)}`;
const on = (limit: number | undefined): limit is number => limit !== undefined && limit > 0;

/** The guard after a response: its figures added, its tool calls counted, the ceilings and the context checked. */
export function afterTurn(s: GuardState, turn: GuardTurn, limits: GuardLimits): GuardState {
  const held = ceilingCostOf(turn.model, turn.usage, turn.provider);
  const cost = held.assumed ? null : held.usd;
  const context = turnContextTokens(turn.usage);
  const calls = { ...s.calls };
  for (const c of turn.toolCalls) {
    const key = `${c.name}\u0000${c.input}`;
    calls[key] = (calls[key] ?? 0) + 1;
  }
  const next: GuardState = {
    ...s,
    usage: addUsage(s.usage, turn.usage),
    costUsd: s.costUsd + (cost ?? 0),
    heldUsd: s.heldUsd + held.usd,
    unpriced: s.unpriced || (cost === null && totalTokens(turn.usage) > 0),
    turns: s.turns + 1,
    calls,
    idleTurns: turn.toolCalls.length > 0 ? s.idleTurns + 1 : s.idleTurns,
  };
  if (context > 0) {
    next.last = { context, output: turn.usage.output, heldUsd: held.usd };
    next.context = contextAfterTurn(turn.model, turn.usage, turn.at);
  }
  next.stop ??=
    overCeiling(next, limits) ?? (next.context && overContextLimit(next.context, limits.maxContextPct));
  return next;
}

/** Why the task is over a ceiling already, or undefined. */
function overCeiling(s: GuardState, limits: GuardLimits): string | undefined {
  const tokens = totalTokens(s.usage);
  if (on(limits.tokens) && tokens > limits.tokens)
    return `stopped: the task used ${n(tokens)} tokens, over the per-task ceiling of ${n(limits.tokens)} (budgets.per_task_tokens)`;
  if (on(limits.usd) && s.heldUsd > limits.usd)
    return `stopped: the task cost ${usd(s.heldUsd)}${unpricedNote(s)}, over the per-task ceiling of ${usd(limits.usd)} (budgets.per_task_usd)`;
  return undefined;
}

/**
 * Whether the next request may go out, after the worktree was checked (`changed`: it differs from
 * the last check, which forgets the counted calls and idle turns). The guard's `stop` says why not:
 * a ceiling the request would pass (it reads at least what the last turn read and answered, and so
 * does each of the `inFlight` requests admitted before it and not answered yet), a repeated tool
 * call, too many idle turns (`idleTurns` counts only where `countIdle`).
 */
export function beforeRequest(
  s: GuardState,
  limits: GuardLimits,
  opts: { changed: boolean; countIdle: boolean; inFlight?: number },
): GuardState {
  const next: GuardState = opts.changed ? { ...s, calls: {}, idleTurns: 0 } : { ...s };
  if (next.stop) return next;
  next.stop =
    wouldPassCeiling(next, limits, opts.inFlight ?? 0) ??
    repeated(next, limits) ??
    idle(next, limits, opts.countIdle);
  return next;
}

function wouldPassCeiling(s: GuardState, limits: GuardLimits, inFlight: number): string | undefined {
  if (!s.last) return undefined;
  const tokens = totalTokens(s.usage);
  const next = s.last.context + s.last.output;
  // Requests admitted and not answered yet are each held at what this one reads at least.
  const pending = Math.max(0, inFlight);
  const also = pending > 0 ? ` and ${pending} more in flight` : "";
  if (on(limits.tokens) && tokens + (pending + 1) * next > limits.tokens)
    return `stopped: the next model request would pass the per-task ceiling of ${n(limits.tokens)} tokens (budgets.per_task_tokens): ${n(tokens)} used, and it${also} ${pending > 0 ? "read" : "reads"} at least ${n(next)}${pending > 0 ? " each" : ""}; the gateway refused it`;
  if (on(limits.usd) && s.last.heldUsd > 0 && s.heldUsd + (pending + 1) * s.last.heldUsd > limits.usd)
    return `stopped: the next model request would pass the per-task ceiling of ${usd(limits.usd)} (budgets.per_task_usd): ${usd(s.heldUsd)} spent${unpricedNote(s)}, and it${also} ${pending > 0 ? "cost" : "costs"} about ${usd(s.last.heldUsd)}${pending > 0 ? " each" : ""}; the gateway refused it`;
  return undefined;
}

/** Said beside a cost the ceiling holds at an assumed price. */
const unpricedNote = (s: GuardState): string =>
  s.unpriced
    ? " (at most: a model with no price in Fleet's table is counted at its provider's highest list price)"
    : "";

function repeated(s: GuardState, limits: GuardLimits): string | undefined {
  if (!on(limits.repeatedToolCalls)) return undefined;
  for (const [key, count] of Object.entries(s.calls)) {
    if (count < limits.repeatedToolCalls) continue;
    const [name, input] = key.split("\u0000") as [string, string];
    const shown = input.length > 120 ? `${input.slice(0, 117)}...` : input;
    return `stopped: the agent asked for the same tool call ${count} times with nothing changed in the worktree (${name} ${shown}); runaway.repeated_tool_calls is ${limits.repeatedToolCalls}`;
  }
  return undefined;
}

function idle(s: GuardState, limits: GuardLimits, countIdle: boolean): string | undefined {
  if (!countIdle || !on(limits.idleTurns) || s.idleTurns < limits.idleTurns) return undefined;
  return `stopped: ${s.idleTurns} turns in a row changed nothing in the worktree; runaway.idle_turns is ${limits.idleTurns}`;
}
