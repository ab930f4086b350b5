import type { BeadDependency, BeadIssue } from "./record.ts";
import { parseRfc3339 } from "./time.ts";

/**
 * Readiness as `bd ready` computes it (beads internal/storage/sqlite/blocked_cache.go and
 * ready.go, GetReadyWork + rebuildBlockedCache):
 *
 * An issue is *blocked* when
 * - it has a `blocks` dependency whose target exists with status open / in_progress / blocked /
 *   deferred (a closed, tombstoned, pinned, hooked or missing target does not block: beads JOINs
 *   the target and tests that status list);
 * - it has a `conditional-blocks` dependency whose target is in that list, or is closed without
 *   a failure close reason ("failed", "rejected", "wontfix", "cancelled", ...);
 * - it has a `waits-for` dependency on a spawner that still has a child that is not closed /
 *   tombstone (gate "all-children", the default), or none closed yet ("any-children");
 * - its parent (a `parent-child` dependency points from child to parent) is blocked, transitively,
 *   up to 50 levels deep as beads' recursive CTE.
 * `related`, `discovered-from` and every other type never block.
 *
 * An issue is *ready* when it is not blocked, its status is open or in_progress (bd ready lists
 * in_progress too, so epics and claimed tasks ready to close stay visible), it is not pinned or
 * ephemeral, its type is not merge-request / gate / molecule / message / agent, and its
 * defer_until is not in the future (checked only when `now` is given).
 */

const BLOCKING_STATUSES: ReadonlySet<string> = new Set(["open", "in_progress", "blocked", "deferred"]);
const READY_STATUSES: ReadonlySet<string> = new Set(["open", "in_progress"]);
const NOT_WORK_TYPES: ReadonlySet<string> = new Set([
  "merge-request",
  "gate",
  "molecule",
  "message",
  "agent",
]);
const FAILURE_WORDS = [
  "failed",
  "rejected",
  "wontfix",
  "won't fix",
  "canceled",
  "cancelled",
  "abandoned",
  "blocked",
  "error",
  "timeout",
  "aborted",
];
const MAX_PARENT_DEPTH = 50;

export interface ReadyOptions {
  /** When given, issues with a later defer_until are not ready (bd ready's default). */
  now?: Date | string;
  /** Statuses that can be ready; default open and in_progress, as bd ready. */
  statuses?: readonly string[];
}

export interface Readiness {
  ready: BeadIssue[];
  /** Blocked issue id -> what blocks it: open blocker ids, then blocked parent ids. */
  blocked: Map<string, string[]>;
}

const isFailureClose = (reason: unknown): boolean =>
  typeof reason === "string" && FAILURE_WORDS.some((w) => reason.toLowerCase().includes(w));

const statusOf = (issue: BeadIssue): string => issue.status ?? "open";

function epochMs(value: string): number | undefined {
  const parts = parseRfc3339(value);
  return parts ? parts.epochSeconds * 1000 + Number(`0.${parts.fraction || "0"}`) * 1000 : undefined;
}

/** Issues indexed once: by id and children by parent. */
function indexIssues(issues: readonly BeadIssue[]) {
  const byId = new Map<string, BeadIssue>();
  for (const issue of issues) byId.set(issue.id, issue);
  const childrenOf = new Map<string, string[]>();
  for (const issue of issues) {
    for (const dep of issue.dependencies ?? []) {
      if (dep.type !== "parent-child") continue;
      const list = childrenOf.get(dep.depends_on_id);
      if (list) list.push(issue.id);
      else childrenOf.set(dep.depends_on_id, [issue.id]);
    }
  }
  return { byId, childrenOf };
}

/** Ready issues and the blockers of every blocked issue, in one linear pass over the graph. */
export function computeReadiness(issues: readonly BeadIssue[], options: ReadyOptions = {}): Readiness {
  const { byId, childrenOf } = indexIssues(issues);
  const blocked = new Map<string, string[]>();
  const addBlocker = (id: string, by: string) => {
    const list = blocked.get(id);
    if (!list) blocked.set(id, [by]);
    else if (!list.includes(by)) list.push(by);
  };

  for (const issue of issues) {
    for (const dep of issue.dependencies ?? []) {
      const target = byId.get(dep.depends_on_id);
      if (dep.type === "blocks") {
        if (target && BLOCKING_STATUSES.has(statusOf(target))) addBlocker(issue.id, target.id);
      } else if (dep.type === "conditional-blocks") {
        if (!target) continue;
        const status = statusOf(target);
        if (BLOCKING_STATUSES.has(status) || (status === "closed" && !isFailureClose(target.close_reason))) {
          addBlocker(issue.id, target.id);
        }
      } else if (dep.type === "waits-for") {
        if (waitsForBlocks(dep.depends_on_id, dep.metadata, byId, childrenOf)) {
          addBlocker(issue.id, dep.depends_on_id);
        }
      }
    }
  }

  // Children of blocked issues are blocked, breadth first so each is reached at its least depth.
  let frontier = [...blocked.keys()];
  const seen = new Set(frontier);
  for (let depth = 0; depth < MAX_PARENT_DEPTH && frontier.length > 0; depth++) {
    const next: string[] = [];
    for (const parent of frontier) {
      for (const child of childrenOf.get(parent) ?? []) {
        addBlocker(child, parent);
        if (!seen.has(child)) {
          seen.add(child);
          next.push(child);
        }
      }
    }
    frontier = next;
  }

  const statuses = new Set(options.statuses ?? READY_STATUSES);
  const now =
    options.now === undefined
      ? undefined
      : options.now instanceof Date
        ? options.now.getTime()
        : epochMs(options.now);
  const ready: BeadIssue[] = [];
  for (const issue of byId.values()) {
    if (blocked.has(issue.id)) continue;
    if (!statuses.has(statusOf(issue))) continue;
    if (issue.pinned === true || issue.ephemeral === true) continue;
    if (issue.issue_type !== undefined && NOT_WORK_TYPES.has(issue.issue_type)) continue;
    if (now !== undefined && typeof issue.defer_until === "string") {
      const until = epochMs(issue.defer_until);
      if (until !== undefined && until > now) continue;
    }
    ready.push(issue);
  }
  sortByPriorityThenAge(ready);
  return { ready, blocked };
}

function waitsForBlocks(
  spawnerId: string,
  metadata: unknown,
  byId: Map<string, BeadIssue>,
  childrenOf: Map<string, string[]>,
): boolean {
  let gate = "all-children";
  let spawner = spawnerId;
  if (typeof metadata === "string" && metadata.trim() !== "") {
    try {
      const meta = JSON.parse(metadata) as { gate?: unknown; spawner_id?: unknown };
      if (meta.gate === "any-children") gate = "any-children";
      if (typeof meta.spawner_id === "string" && meta.spawner_id !== "") spawner = meta.spawner_id;
    } catch {
      // beads treats unreadable gate metadata as the default gate.
    }
  }
  const children = (childrenOf.get(spawner) ?? []).map((id) => byId.get(id)).filter((c) => c !== undefined);
  const done = (c: BeadIssue) => statusOf(c) === "closed" || statusOf(c) === "tombstone";
  return gate === "all-children" ? children.some((c) => !done(c)) : !children.some(done);
}

/** bd ready's "priority" order: priority, then oldest first, then id (times parsed once). */
function sortByPriorityThenAge(issues: BeadIssue[]): void {
  const created = new Map<BeadIssue, number>();
  for (const issue of issues) created.set(issue, epochMs(issue.created_at) ?? 0);
  issues.sort((a, b) => {
    if (a.priority !== b.priority) return (a.priority ?? 0) - (b.priority ?? 0);
    const ta = created.get(a)!;
    const tb = created.get(b)!;
    if (ta !== tb) return ta - tb;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
}

/** The issues `bd ready` would list, most urgent first. */
export function readyIssues(issues: readonly BeadIssue[], options: ReadyOptions = {}): BeadIssue[] {
  return computeReadiness(issues, options).ready;
}

/** What blocks `id`: open blocker ids, then blocked parent ids; empty when it is not blocked. */
export function blockedBy(issues: readonly BeadIssue[], id: string): string[] {
  return computeReadiness(issues).blocked.get(id) ?? [];
}

const CYCLE_TYPES: ReadonlySet<string> = new Set([
  "blocks",
  "parent-child",
  "conditional-blocks",
  "waits-for",
]);

/**
 * Dependency cycles over the edges that affect readiness (blocks, parent-child,
 * conditional-blocks, waits-for). Each entry is one strongly connected component with more than one
 * issue (or an issue depending on itself): every id in it lies on a cycle. Ids are listed in the
 * order of a cycle through the component where one is found by walking it, sorted otherwise; the
 * components are sorted by their first id. Iterative Tarjan: linear, no recursion, no endless loops.
 */
export function findCycles(
  issues: ReadonlyArray<{
    id: string;
    dependencies?: ReadonlyArray<Pick<BeadDependency, "depends_on_id" | "type">>;
  }>,
): string[][] {
  const ids: string[] = [];
  const indexOf = new Map<string, number>();
  for (const issue of issues) {
    if (!indexOf.has(issue.id)) {
      indexOf.set(issue.id, ids.length);
      ids.push(issue.id);
    }
  }
  const edges: number[][] = ids.map(() => []);
  const selfLoop = new Set<number>();
  for (const issue of issues) {
    const from = indexOf.get(issue.id)!;
    for (const dep of issue.dependencies ?? []) {
      if (!CYCLE_TYPES.has(dep.type)) continue;
      const to = indexOf.get(dep.depends_on_id);
      if (to === undefined) continue;
      if (to === from) selfLoop.add(from);
      edges[from]!.push(to);
    }
  }

  const n = ids.length;
  const index = new Int32Array(n).fill(-1);
  const low = new Int32Array(n);
  const onStack = new Uint8Array(n);
  const stack: number[] = [];
  const components: number[][] = [];
  let counter = 0;
  const work: Array<[node: number, edge: number]> = [];

  for (let root = 0; root < n; root++) {
    if (index[root] !== -1) continue;
    work.push([root, 0]);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const [v, e] = frame;
      if (e === 0 && index[v] === -1) {
        index[v] = low[v] = counter++;
        stack.push(v);
        onStack[v] = 1;
      }
      const out = edges[v]!;
      if (e < out.length) {
        frame[1] = e + 1;
        const w = out[e]!;
        if (index[w] === -1) work.push([w, 0]);
        else if (onStack[w]) low[v] = Math.min(low[v]!, index[w]!);
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]![0];
        low[parent] = Math.min(low[parent]!, low[v]!);
      }
      if (low[v] === index[v]) {
        const component: number[] = [];
        let w: number;
        do {
          w = stack.pop()!;
          onStack[w] = 0;
          component.push(w);
        } while (w !== v);
        if (component.length > 1 || selfLoop.has(v)) components.push(component);
      }
    }
  }

  return components
    .map((component) => orderAlongCycle(component, edges, ids))
    .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0));
}

/** Walk from the smallest id along edges inside the component; if the walk closes over every member, use its order. */
function orderAlongCycle(component: number[], edges: number[][], ids: string[]): string[] {
  const members = new Set(component);
  const sorted = component.map((i) => ids[i]!).sort();
  const start = component.find((i) => ids[i] === sorted[0])!;
  const path = [start];
  const visited = new Set([start]);
  let current = start;
  for (;;) {
    const next = edges[current]!.filter((w) => members.has(w)).sort((a, b) => (ids[a]! < ids[b]! ? -1 : 1));
    const step = next.find((w) => !visited.has(w));
    if (step === undefined) break;
    path.push(step);
    visited.add(step);
    current = step;
  }
  const closes = edges[current]!.includes(start);
  return closes && path.length === component.length ? path.map((i) => ids[i]!) : sorted;
}
