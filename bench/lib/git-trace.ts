// Which state-store operation (and which part of Fleet) each git smart-HTTP request belongs to: the git
// state stores publish every fetch and push on a diagnostics channel (src/state/git-store.ts); the
// emulator logs every git request. A request is the operation's when it arrived inside the operation's
// window and is of its service (upload-pack for a fetch, receive-pack for a push).
import { AsyncLocalStorage } from "node:async_hooks";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { STATE_GIT_CHANNEL, type StateGitEvent } from "../../src/state/git-store.ts";

/** Runs a part of Fleet (the app, a worker) under a name, so the git operations it causes carry it. */
export const partOf = new AsyncLocalStorage<string>();

export interface GitOperation {
  part: string;
  operation: "fetch" | "push";
  cause: string;
  rejected: boolean;
  requests: number;
}

export interface GitTrace {
  /** Operations in the order they started, each with its git requests. */
  operations: GitOperation[];
  /** Requests of no state-store operation (a worker's clone or branch push over HTTP). */
  other: number;
  /** "part operation: cause" -> git requests. */
  byCause: Record<string, number>;
}

export function traceGit(gh: GitHubEmulator) {
  type Open = GitOperation & { from: number; to?: number };
  const open: Open[] = [];
  const since = gh.gitRequests.mark();
  const active = new Map<string, Open[]>();
  const onEvent = (m: unknown) => {
    const e = m as StateGitEvent;
    const part = partOf.getStore() ?? "?";
    const id = `${part} ${e.operation} ${e.cause}`;
    if (e.phase === "start") {
      const from = gh.gitRequests.mark();
      const op: Open = { part, operation: e.operation, cause: e.cause, rejected: false, requests: 0, from };
      open.push(op);
      active.set(id, [...(active.get(id) ?? []), op]);
      return;
    }
    const op = active.get(id)?.shift();
    if (op) {
      op.to = gh.gitRequests.mark();
      op.rejected = e.rejected === true;
    }
  };
  subscribe(STATE_GIT_CHANNEL, onEvent);
  return {
    stop(): GitTrace {
      unsubscribe(STATE_GIT_CHANNEL, onEvent);
      let other = 0;
      for (const r of gh.gitRequests.entries) {
        if (r.seq <= since) continue;
        const service = r.service === "git-receive-pack" ? "push" : "fetch";
        const op = open.find(
          (o) => o.operation === service && r.seq > o.from && (o.to === undefined || r.seq <= o.to),
        );
        if (op) op.requests++;
        else other++;
      }
      const operations = open.map(({ part, operation, cause, rejected, requests }) => ({
        part,
        operation,
        cause,
        rejected,
        requests,
      }));
      const byCause: Record<string, number> = {};
      for (const o of operations) {
        const k = `${o.part} ${o.operation}${o.rejected ? " (rejected)" : ""}: ${o.cause}`;
        byCause[k] = (byCause[k] ?? 0) + o.requests;
      }
      return { operations, other, byCause };
    },
  };
}
