import type { CredentialWindows } from "../core/rate-windows.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";

/** One configured credential of a coder: its name (never its value) and until when it is cooling. */
export interface PooledCredential {
  name: string;
  /** RFC3339; the provider rate-limited this credential until then. */
  coolingUntil?: string;
}

/** A coder's credentials in config order. */
export interface CredentialPool {
  coder: string;
  credentials: PooledCredential[];
}

/** `doc.credentials[coder][name]`: the cooling state and rate-limit windows shared by every worker of the repository. */
export type CredentialsState = Record<
  string,
  Record<string, { coolingUntil?: string; windows?: CredentialWindows }>
>;

const CREDENTIALS_KEY = "credentials";

/** The cooling state kept in the state document (absent in documents written before pools). */
export function credentialsState(doc: FleetStateDoc): CredentialsState {
  const raw = doc[CREDENTIALS_KEY];
  return typeof raw === "object" && raw !== null && !Array.isArray(raw) ? (raw as CredentialsState) : {};
}

/** The pool of `coder` over its configured names, with the cooling times the state records. */
export function poolFor(coder: string, names: readonly string[], state: CredentialsState): CredentialPool {
  const cooling = state[coder] ?? {};
  return {
    coder,
    credentials: names.map((name) => {
      const until = cooling[name]?.coolingUntil;
      return until ? { name, coolingUntil: until } : { name };
    }),
  };
}

/** When the first cooling credential (among `usable` ones) is free again; undefined if none cools. */
export function earliestReset(
  pool: CredentialPool,
  now: Date,
  usable: (name: string) => boolean = () => true,
): string | undefined {
  let best: number | undefined;
  for (const c of pool.credentials) {
    if (!usable(c.name) || c.coolingUntil === undefined) continue;
    const t = Date.parse(c.coolingUntil);
    if (!(t > now.getTime())) continue;
    if (best === undefined || t < best) best = t;
  }
  return best === undefined ? undefined : new Date(best).toISOString();
}

/** The state document with `coder`'s `name` cooling until `until`; expired entries of the coder are dropped. */
export function recordCooling(
  doc: FleetStateDoc,
  coder: string,
  name: string,
  until: string,
  now: Date,
): FleetStateDoc {
  const state = credentialsState(doc);
  const mine: Record<string, { coolingUntil?: string; windows?: CredentialWindows }> = {};
  for (const [n, v] of Object.entries(state[coder] ?? {})) {
    // An expired cooling time goes; the credential's windows stay.
    const cooling = v.coolingUntil && Date.parse(v.coolingUntil) > now.getTime() ? v.coolingUntil : undefined;
    if (cooling || v.windows)
      mine[n] = {
        ...(cooling ? { coolingUntil: cooling } : {}),
        ...(v.windows ? { windows: v.windows } : {}),
      };
  }
  const prior = mine[name]?.coolingUntil;
  mine[name] = {
    ...mine[name],
    coolingUntil: prior && Date.parse(prior) > Date.parse(until) ? prior : until,
  };
  return { ...doc, [CREDENTIALS_KEY]: { ...state, [coder]: mine } };
}

/**
 * When a rate-limited credential is free again: the provider's reset time, else now + its
 * retry-after, else now + `fallbackSeconds` (the provider said nothing usable).
 */
export function resetTime(
  rateLimit: { resetsAt?: string; retryAfterSeconds?: number } | undefined,
  now: Date,
  fallbackSeconds: number,
): string {
  // The reset comes through the agent, which may lie: no credential cools longer than the providers'
  // longest window (a week), nor shorter than now.
  const latest = now.getTime() + MAX_COOLING_MS;
  const at =
    rateLimit?.resetsAt && !Number.isNaN(Date.parse(rateLimit.resetsAt))
      ? Date.parse(rateLimit.resetsAt)
      : now.getTime() + (rateLimit?.retryAfterSeconds ?? fallbackSeconds) * 1000;
  return new Date(Math.min(Math.max(at, now.getTime()), latest)).toISOString();
}

/** The longest a credential is marked cooling: Claude's weekly limit is the longest window a provider has. */
export const MAX_COOLING_MS = 7 * 24 * 3600_000;
