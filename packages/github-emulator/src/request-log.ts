export type RequestClass = "read" | "write" | "content";

export interface LoggedRequest {
  at: number;
  seq: number;
  method: string;
  path: string;
  /** "METHOD /template" for spec routes, "METHOD <path>" when the path is not in the spec. */
  route: string;
  status: number;
  class: RequestClass;
  actor: string;
}

// GitHub's "content-generating" requests (secondary rate limits): things that notify people.
const contentRoutes = new Set([
  "POST /repos/{owner}/{repo}/issues",
  "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
  "POST /repos/{owner}/{repo}/pulls",
  "POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews",
  "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments",
  "POST /repos/{owner}/{repo}/git/commits",
  "PUT /repos/{owner}/{repo}/contents/{path}",
]);

export function classify(method: string, route: string): RequestClass {
  if (method === "GET" || method === "HEAD") return "read";
  return contentRoutes.has(route) ? "content" : "write";
}

/** An append-only log of requests with sequence numbers, so a caller can count what came after a mark. */
export class SequencedLog<E extends { seq: number; at: number }> {
  readonly entries: E[] = [];
  private seq = 0;

  add(e: Omit<E, "seq" | "at">): void {
    this.seq += 1;
    this.entries.push({ ...e, seq: this.seq, at: Date.now() } as E);
  }

  /** Sequence number of the last request; pass it as `since` to count only later ones. */
  mark(): number {
    return this.seq;
  }

  clear(): void {
    this.entries.length = 0;
  }

  protected after(since: number | undefined): E[] {
    return this.entries.filter((e) => since === undefined || e.seq > since);
  }
}

/** Every API request the emulator answered, in order. */
export class RequestLog extends SequencedLog<LoggedRequest> {
  /**
   * `writes` counts every non-read request, content-creating ones included;
   * `contentCreating` is the subset GitHub's content limits apply to. `since` is a `mark()`.
   */
  counts(filter: { since?: number } = {}) {
    const rows = this.after(filter.since);
    const byRoute: Record<string, number> = {};
    let reads = 0;
    let writes = 0;
    let contentCreating = 0;
    for (const e of rows) {
      byRoute[e.route] = (byRoute[e.route] ?? 0) + 1;
      if (e.class === "read") reads += 1;
      else writes += 1;
      if (e.class === "content") contentCreating += 1;
    }
    return { total: rows.length, reads, writes, contentCreating, byRoute };
  }
}
