export interface FaultSpec {
  /**
   * A route template ("/repos/{owner}/{repo}/issues") or "METHOD /template"; "*" matches every REST
   * route. Git smart-HTTP routes (`GIT_ROUTES` in git-http.ts) match only when named.
   */
  route: string;
  status?: number;
  retryAfter?: number;
  latencyMs?: number;
  /** The request waits (after any latency) until this settles: a hold the test releases on cue. */
  holdUntil?: Promise<unknown>;
  /** How many matching requests the fault applies to; unlimited when omitted. */
  times?: number;
  /** Record the webhooks this route emits but never send them (a lost delivery). */
  dropDelivery?: boolean;
}

interface ActiveFault extends FaultSpec {
  used: number;
}

/** Faults injected by tests, consumed by matching requests in arrival order. */
export class Faults {
  private list: ActiveFault[] = [];

  inject(f: FaultSpec): void {
    this.list.push({ ...f, used: 0 });
  }

  clear(): void {
    this.list = [];
  }

  /** The fault to apply to this request, counted as used; `wildcard: false` ignores "*" faults. */
  take(method: string, template: string, o: { wildcard?: boolean } = {}): FaultSpec | undefined {
    for (const f of this.list) {
      if (f.times !== undefined && f.used >= f.times) continue;
      if (f.route === "*" && o.wildcard === false) continue;
      if (!matches(f.route, method, template)) continue;
      f.used += 1;
      return f;
    }
    return undefined;
  }
}

/** Waits out a fault's latency and hold, if any, before the request is answered. */
export async function delayOf(fault: FaultSpec | undefined): Promise<void> {
  if (fault?.latencyMs) await new Promise((r) => setTimeout(r, fault.latencyMs));
  if (fault?.holdUntil) await fault.holdUntil.catch(() => undefined);
}

function matches(route: string, method: string, template: string): boolean {
  if (route === "*") return true;
  const sp = route.indexOf(" ");
  if (sp > 0) return route.slice(0, sp).toUpperCase() === method && route.slice(sp + 1) === template;
  return route === template;
}
