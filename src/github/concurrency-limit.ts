import { NULL_BODY } from "./fresh-connection-fetch.ts";

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * Requests Fleet has in flight at once with one token (an installation's, a person's, a run's). GitHub
 * refuses a caller's requests beyond 100 in flight (a secondary rate limit, REST and GraphQL together)
 * and asks for requests "serially instead of concurrently"; Octokit's throttling plugin holds an
 * installation to 10, which this keeps when that plugin is off (a worker's client, tests, benchmarks).
 * It also bounds what a burst holds in memory: 100 repositories swept at once had ~900 requests open.
 * https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits
 * https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#avoid-concurrent-requests
 */
export const REQUESTS_IN_FLIGHT_PER_TOKEN = 10;

interface Lane {
  running: number;
  waiting: Array<() => void>;
}

/**
 * How long a request may hold its place. GitHub ends a request it takes over 10 s to process
 * (https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#timeouts), so a request
 * still open after this is one the network lost: it goes on, but no longer holds back its token's others.
 */
export const PLACE_HELD_AT_MOST_MS = 120_000;

/**
 * `fetch` with at most `limit` requests in flight per Authorization header (one token, one caller to
 * GitHub; requests without one share a lane). A request holds its place until its answer's body is
 * read, as GitHub counts it, so the answer comes back read (Octokit reads every body whole anyway), or
 * for `heldAtMostMs` at most. A request whose signal aborts while it waits in line leaves the line.
 */
export function limitRequestsPerToken(
  fetchImpl: Fetch,
  limit = REQUESTS_IN_FLIGHT_PER_TOKEN,
  heldAtMostMs = PLACE_HELD_AT_MOST_MS,
): Fetch {
  const lanes = new Map<string, Lane>();
  const enter = (key: string, signal: AbortSignal | null | undefined): Promise<Lane> => {
    let lane = lanes.get(key);
    if (!lane) {
      lane = { running: 0, waiting: [] };
      lanes.set(key, lane);
    }
    signal?.throwIfAborted();
    if (lane.running < limit) {
      lane.running += 1;
      return Promise.resolve(lane);
    }
    const waitingIn = lane;
    return new Promise<Lane>((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener("abort", abort);
        resolve(waitingIn);
      };
      const abort = () => {
        const at = waitingIn.waiting.indexOf(go);
        if (at >= 0) waitingIn.waiting.splice(at, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", abort, { once: true });
      waitingIn.waiting.push(go);
    });
  };
  const leave = (key: string, lane: Lane) => {
    const next = lane.waiting.shift();
    // The place passes to the next request in line without being given up.
    if (next) return next();
    lane.running -= 1;
    if (lane.running === 0) lanes.delete(key);
  };
  return async (input, init) => {
    const key = authorizationOf(input, init);
    const lane = await enter(key, init?.signal);
    let held = true;
    const giveUp = () => {
      if (!held) return;
      held = false;
      leave(key, lane);
    };
    const timer = setTimeout(giveUp, heldAtMostMs);
    timer.unref();
    try {
      const response = await fetchImpl(input, init);
      // A status a Response cannot be made with (outside 200-599) is handed back as it came.
      if (response.status < 200 || response.status > 599) return response;
      const body = NULL_BODY.has(response.status) || !response.body ? null : await response.arrayBuffer();
      const read = new Response(body, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
      // Octokit reports the address it was answered from (after redirects).
      Object.defineProperty(read, "url", { value: response.url });
      return read;
    } finally {
      clearTimeout(timer);
      giveUp();
    }
  };
}

function authorizationOf(input: string | URL | Request, init?: RequestInit): string {
  if (init?.headers) return new Headers(init.headers).get("authorization") ?? "";
  return input instanceof Request ? (input.headers.get("authorization") ?? "") : "";
}
