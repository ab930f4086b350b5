import { contextModelOf } from "../../core/context-windows.ts";
import type { InFlight } from "../../core/rate-windows.ts";
import {
  afterTurn,
  beforeRequest,
  DEFAULT_RUN_LIMITS,
  type GuardLimits,
  type GuardState,
  newGuard,
} from "../../core/run-guard.ts";
import { addUsage, emptyUsage, type RunTotals, type TokenUsage, totalTokens } from "../../core/usage.ts";
import type { WindowBook } from "../../economy/credential-windows.ts";
import { type WireTurn, wireProviderOf } from "../../economy/wire-usage.ts";
import type { WorktreeGitDirs } from "../workspace/git.ts";
import type {
  GatewayRequest,
  GatewayResponse,
  GrantCredentials,
  GrantPolicy,
  NamedCredential,
} from "./model-gateway.ts";
import { newPrintCache, worktreePrint } from "./worktree-print.ts";

/** The pool a run draws from at the gateway (the credential rotation of economy/rotation.ts). */
export interface RunPool {
  coder: string;
  book: WindowBook;
  /** `limited` answered 429: marks it cooling and returns the next credential, if any. */
  rotate(limited: {
    name: string;
    rateLimit?: { retryAfterSeconds?: number };
  }): Promise<NamedCredential | undefined>;
  /** Another credential when `current` is near a window's limit and one has room. */
  next(current: string): NamedCredential | undefined;
}

/** A run's limits at the gateway: the per-task ceilings and the runaway and context limits (their defaults when not given). */
export function guardLimitsOf(deps: {
  perTaskLimits?: { tokens?: number; usd?: number };
  runLimits?: Pick<GuardLimits, "repeatedToolCalls" | "idleTurns" | "maxContextPct">;
}): GuardLimits {
  return {
    ...(deps.runLimits ?? DEFAULT_RUN_LIMITS),
    ...(deps.perTaskLimits?.tokens ? { tokens: deps.perTaskLimits.tokens } : {}),
    ...(deps.perTaskLimits?.usd ? { usd: deps.perTaskLimits.usd } : {}),
  };
}

export interface GatewayRunOptions {
  phase: "plan" | "work";
  limits: GuardLimits;
  /** What the task spent before this phase (its plan phase): counted against the ceilings. */
  earlier?: { usage?: TokenUsage; costUsd?: number | null };
  credential: NamedCredential;
  /** The model the task was configured with (`sonnet[1m]`: its turns are held against the 1M window). */
  model?: string;
  pool?: RunPool;
  /** The worktree, watched for changes between turns (runaway.idle_turns, repeated calls). */
  worktree?: WorktreeGitDirs;
  clock: () => Date;
  /** The run must stop: the agent is stopped with this reason. */
  onStop: (reason: string) => void;
  /** A credential was given to the run (a rotation): it becomes a known secret. */
  onCredential?: (credential: NamedCredential) => void;
  /** After each metered turn. */
  onTurn?: (guard: GuardState) => void;
  log?: (message: string) => void;
}

/**
 * One agent phase at the gateway: the credential its requests go out on (moved off one near its limit,
 * retried on the next after a 429), and the guard that meters every answer and refuses the request
 * that would pass a ceiling or repeat a runaway. What the wire showed is the phase's token report.
 */
export function createGatewayRun(opts: GatewayRunOptions) {
  let guard = newGuard(opts.earlier);
  const start = newGuard(opts.earlier);
  let wire = emptyUsage();
  let turns = 0;
  let model: string | undefined;
  let credential = opts.credential;
  const worktreeChanged = worktreeWatch(opts);
  /** Requests admitted and not settled yet. */
  let inFlight = 0;
  const flying = inFlightOn(opts.pool);
  let disposed = false;
  let stopped = false;
  const startedAt = Date.now();
  const pool = opts.pool;
  pool?.book.move(pool.coder, credential.name, 1);

  const switchTo = (next: NamedCredential, why: string) => {
    opts.log?.(`${pool?.coder ?? "agent"}: ${why}; going on with ${next.name}`);
    opts.onCredential?.(next);
    pool?.book.move(pool.coder, credential.name, -1);
    pool?.book.move(pool.coder, next.name, 1);
    credential = next;
  };
  const stop = (reason: string) => {
    if (stopped) return;
    stopped = true;
    opts.onStop(reason);
  };

  const credentials = runCredentials(pool, flying, { current: () => credential, switchTo });

  const policy: GrantPolicy = {
    async admit() {
      if (guard.stop) return guard.stop;
      const changed = await worktreeChanged();
      guard = beforeRequest(guard, opts.limits, { changed, countIdle: opts.phase === "work", inFlight });
      if (guard.stop) stop(guard.stop);
      // Admitted: held against the ceilings until it is settled (answered, cut off, or failed).
      else inFlight++;
      return guard.stop;
    },
    settled(request) {
      inFlight = Math.max(0, inFlight - 1);
      // Failed or cut off without an answer recorded: no longer in flight on its credential.
      flying.release(request);
    },
    onResponse(r: GatewayResponse) {
      // The turn is metered first: nothing a provider's headers say may keep it from counting.
      if (r.turn?.metered) meter(r.turn, r.request);
      if (pool) recordWindows(pool, r, opts.clock(), opts.log);
      // The answer's figures are in the book now (a 429 retried stays in flight, on the next credential).
      if (r.status !== 429) flying.release(r.request);
    },
  };

  /** A metered turn: its figures added to the phase's, then the guard's checks. */
  function meter(turn: WireTurn, request: GatewayRequest | undefined) {
    // Measured against the window the run asked for: a `sonnet[1m]` answer names no `[1m]`.
    // An answer cut off before it named its model is the configured model's.
    const turnModel = contextModelOf(turn.model ?? model ?? opts.model ?? "", {
      configured: opts.model,
      anthropicBeta: request?.headers["anthropic-beta"],
    });
    model = turn.model ?? model;
    flying.metered(turn.usage);
    wire = addUsage(wire, turn.usage);
    turns++;
    guard = afterTurn(
      guard,
      {
        model: turnModel,
        provider: turn.provider,
        usage: turn.usage,
        toolCalls: turn.toolCalls,
        at: opts.clock().toISOString(),
      },
      opts.limits,
    );
    opts.onTurn?.(guard);
    if (guard.stop) stop(guard.stop);
  }

  return {
    credentials,
    policy,
    get guard() {
      return guard;
    },
    /** The run goes on with `next` (the agent was restarted on it after a rate limit it saw). */
    use(next: NamedCredential) {
      if (next.name !== credential.name) switchTo(next, `${credential.name} was rate-limited`);
    },
    /** The credential the run is on now. */
    get credential() {
      return credential;
    },
    /** What the wire showed for this phase (undefined when no answer was metered). */
    totals(fallbackModel: string, durationMs: number): RunTotals | undefined {
      if (turns === 0) return undefined;
      const cost = guard.unpriced ? null : guard.costUsd - start.costUsd;
      return {
        usage: wire,
        costUsd: cost,
        turns,
        durationMs: durationMs || Date.now() - startedAt,
        model: model ?? fallbackModel,
        credential: credential.name,
      };
    },
    /** The run leaves its credential (once; later calls do nothing). */
    dispose() {
      if (disposed) return;
      disposed = true;
      flying.releaseAll();
      pool?.book.move(pool.coder, credential.name, -1);
    },
  };
}
export type GatewayRun = ReturnType<typeof createGatewayRun>;

/** Whether the worktree changed since the last request (watched in a work phase only). */
function worktreeWatch(opts: Pick<GatewayRunOptions, "worktree" | "phase">): () => Promise<boolean> {
  const cache = newPrintCache();
  let last: string | undefined;
  return async () => {
    if (!opts.worktree || opts.phase !== "work") return false;
    const print = await worktreePrint(opts.worktree, cache);
    const changed = print !== undefined && last !== undefined && print !== last;
    if (print !== undefined) last = print;
    return changed;
  };
}

/**
 * Where a run's requests go out: its credential, moved off one near a window's limit (counting what is
 * in flight on it, not only what the last answer said) and, after a 429, retried on the next; each
 * model request held in flight on the credential it went out on.
 */
function runCredentials(
  pool: RunPool | undefined,
  flying: ReturnType<typeof inFlightOn>,
  run: { current: () => NamedCredential; switchTo: (next: NamedCredential, why: string) => void },
): GrantCredentials {
  return {
    current(request) {
      const next = pool?.next(run.current().name);
      if (next) run.switchTo(next, `${run.current().name} is near a rate-limit window's limit`);
      const credential = run.current();
      flying.hold(request, credential.name);
      return credential;
    },
    async rateLimited(name, info, request) {
      const next = await pool?.rotate({ name, rateLimit: info });
      if (next) {
        run.switchTo(next, `${name} answered 429`);
        flying.hold(request, next.name);
      }
      return next;
    },
  };
}

/**
 * A run's requests in flight on the pool's credentials (model requests only), each held in the book at
 * its estimate (inFlightEstimate) from when its credential is chosen until its answer is recorded or
 * it is settled without one.
 */
function inFlightOn(pool: RunPool | undefined) {
  /** The largest figures of the run's metered turns. */
  let turnSize: Omit<InFlight, "requests"> | undefined;
  const held = new Map<GatewayRequest, () => void>();
  const release = (request: GatewayRequest | undefined) => {
    const r = request && held.get(request);
    if (!r) return;
    held.delete(request);
    r();
  };
  return {
    /** `request` is in flight on `name` (no longer on any other credential). */
    hold(request: GatewayRequest | undefined, name: string) {
      if (!pool || !request || !wireProviderOf(request.method, request.path)) return;
      release(request);
      held.set(request, pool.book.hold(pool.coder, name, inFlightEstimate(turnSize, request)));
    },
    release,
    releaseAll() {
      for (const r of [...held.keys()]) release(r);
    },
    /** A turn of the run was metered: the next requests are estimated at it (or larger ones before). */
    metered(usage: TokenUsage) {
      turnSize = largestTurn(turnSize, usage);
    },
  };
}

/**
 * What a request in flight is estimated at: the size of the run's turns (`largest`, each figure the
 * largest a metered turn of the run had: an agent's context grows turn by turn, so this is its last
 * full turn, and a small side answer metered in between, a session title, does not make the next
 * whole-context request count as nothing). Before the run has a metered turn, the request's prompt
 * estimated from its size (4 bytes a token, as a cut-off answer is charged) and no output.
 */
export function inFlightEstimate(
  largest: Omit<InFlight, "requests"> | undefined,
  request: Pick<GatewayRequest, "bodyBytes">,
): Omit<InFlight, "requests"> {
  if (largest) return largest;
  const prompt = Math.ceil((request.bodyBytes ?? 0) / 4);
  return { tokens: prompt, inputTokens: prompt, outputTokens: 0 };
}

/** The run's largest figures so far, with one more metered turn (`input-tokens` windows leave cache reads out). */
export function largestTurn(
  largest: Omit<InFlight, "requests"> | undefined,
  turn: TokenUsage,
): Omit<InFlight, "requests"> {
  return {
    tokens: Math.max(largest?.tokens ?? 0, totalTokens(turn)),
    inputTokens: Math.max(largest?.inputTokens ?? 0, turn.input + turn.cacheWrite),
    outputTokens: Math.max(largest?.outputTokens ?? 0, turn.output),
  };
}

/** What an answer's headers say of its credential's windows, into the pool's book; never throws. */
function recordWindows(pool: RunPool, r: GatewayResponse, now: Date, log?: (message: string) => void) {
  try {
    const tokens = r.turn ? totalTokens(r.turn.usage) : 0;
    pool.book.record(pool.coder, r.credential, { headers: r.headers, tokens }, now);
  } catch (error) {
    log?.(`${pool.coder}: ${r.credential}'s rate-limit headers were not read: ${(error as Error).message}`);
  }
}

/** What a worker gives every agent run at the gateway: its limits, its credential pool, its clock. */
export interface GatewayRunDeps {
  perTaskLimits?: { tokens?: number; usd?: number };
  runLimits?: Pick<GuardLimits, "repeatedToolCalls" | "idleTurns" | "maxContextPct">;
  credentialPool?: RunPool;
  clock?: () => Date;
}

/**
 * An agent run at the gateway as every kind of run has it (a task's plan and work phases, a rebase's
 * agent): the worker's limits (guardLimitsOf), pool and clock, and what the task spent before it
 * (`earlier`: its plan phase, a rebase's earlier agent steps) counted against the ceilings.
 */
export function gatewayRunFor(
  deps: GatewayRunDeps,
  run: Omit<GatewayRunOptions, "limits" | "pool" | "clock" | "earlier"> & {
    earlier?: Pick<RunTotals, "usage" | "costUsd">;
  },
): GatewayRun {
  const { earlier, ...rest } = run;
  return createGatewayRun({
    ...rest,
    limits: guardLimitsOf(deps),
    ...(earlier ? { earlier: { usage: earlier.usage, costUsd: earlier.costUsd } } : {}),
    ...(deps.credentialPool ? { pool: deps.credentialPool } : {}),
    clock: deps.clock ?? (() => new Date()),
  });
}

/**
 * A run's figures for its report: the gateway's (`metered`) where it metered any, with the agent's
 * own cost standing in for a model Fleet has no price for; else the agent's own (`own`).
 */
export function reportedTotals(
  metered: RunTotals | undefined,
  own: RunTotals | undefined,
): RunTotals | undefined {
  if (!metered) return own;
  return metered.costUsd === null && own?.costUsd != null ? { ...metered, costUsd: own.costUsd } : metered;
}
