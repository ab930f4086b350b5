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

/** Statuses whose response has no body (the Fetch standard's null body statuses). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

interface Lane {
  running: number;
  waiting: Array<() => void>;
}

/**
 * `fetch` with at most `limit` requests in flight per Authorization header (one token, one caller to
 * GitHub; requests without one share a lane). A request holds its place until its answer's body is
 * read, as GitHub counts it, so the answer comes back read (Octokit reads every body whole anyway).
 */
export function limitRequestsPerToken(fetchImpl: Fetch, limit = REQUESTS_IN_FLIGHT_PER_TOKEN): Fetch {
  const lanes = new Map<string, Lane>();
  const enter = async (key: string): Promise<Lane> => {
    let lane = lanes.get(key);
    if (!lane) {
      lane = { running: 0, waiting: [] };
      lanes.set(key, lane);
    }
    if (lane.running >= limit) await new Promise<void>((go) => lane!.waiting.push(go));
    else lane.running += 1;
    return lane;
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
    const lane = await enter(key);
    try {
      const response = await fetchImpl(input, init);
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
      leave(key, lane);
    }
  };
}

function authorizationOf(input: string | URL | Request, init?: RequestInit): string {
  if (init?.headers) return new Headers(init.headers).get("authorization") ?? "";
  return input instanceof Request ? (input.headers.get("authorization") ?? "") : "";
}
