/**
 * Which workflows an event starts, the way GitHub reads a workflow's `on:` key. Pure functions over
 * the parsed YAML; actions.ts reads the files and creates the runs.
 *
 * - Forms of `on:` (a string, a list, or a map of events to filters):
 *   https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax#on
 * - `branches`/`branches-ignore`, `tags`/`tags-ignore`, `paths`/`paths-ignore` and `types`:
 *   https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax#onpushpull_requestpull_request_targetpathspaths-ignore
 * - Glob patterns: https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax#filter-pattern-cheat-sheet
 */

export type EventFilters = Record<string, unknown>;

/** The events of a workflow's `on:`, each with its filters (`{}` when it has none); undefined when `on:` is not valid. */
export function parseOn(on: unknown): Map<string, EventFilters> | undefined {
  const out = new Map<string, EventFilters>();
  if (typeof on === "string") {
    out.set(on, {});
    return out;
  }
  if (Array.isArray(on)) {
    for (const e of on) {
      if (typeof e !== "string") return undefined;
      out.set(e, {});
    }
    return out;
  }
  if (on && typeof on === "object") {
    for (const [event, filters] of Object.entries(on as Record<string, unknown>)) {
      if (filters === null || filters === undefined) out.set(event, {});
      else if (typeof filters === "object" && !Array.isArray(filters))
        out.set(event, filters as EventFilters);
      else return undefined;
    }
    return out;
  }
  return undefined;
}

/** A filter pattern as a regular expression (the cheat sheet: `*`, `**`, `?`, `+`, `[a-z]`, `\` escapes). */
export function patternRegExp(pattern: string): RegExp {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\" && i + 1 < pattern.length) {
      re += escapeRe(pattern[++i]!);
    } else if (c === "*") {
      if (pattern[i + 1] === "*") {
        re += ".*";
        i++;
      } else re += "[^/]*";
    } else if (c === "?" || c === "+") {
      // Zero-or-one / one-or-more of the preceding character, as in a regular expression.
      re += re === "" ? escapeRe(c) : c;
    } else if (c === "[") {
      const end = pattern.indexOf("]", i + 1);
      if (end < 0) re += escapeRe(c);
      else {
        re += `[${pattern.slice(i + 1, end).replace(/[^A-Za-z0-9-]/g, (x) => `\\${x}`)}]`;
        i = end;
      }
    } else re += escapeRe(c);
  }
  return new RegExp(`^${re}$`);
}

const escapeRe = (c: string): string => c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/**
 * Whether `name` passes a list of patterns where `!pattern` excludes again: the last pattern that
 * matches decides, so a positive match after a negative one includes the name again.
 */
export function matchesPatterns(name: string, patterns: readonly string[]): boolean {
  let included = false;
  for (const p of patterns) {
    const negative = p.startsWith("!");
    if (patternRegExp(negative ? p.slice(1) : p).test(name)) included = !negative;
  }
  return included;
}

const asPatterns = (v: unknown): string[] | undefined =>
  v === undefined ? undefined : Array.isArray(v) ? v.map(String) : [String(v)];

/** What an event is about, for the filters. */
export interface TriggerFacts {
  event: string;
  /** `pull_request` activity type (opened, synchronize, reopened, ...). */
  action?: string;
  /** push: the branch pushed; pull_request: the base branch. */
  branch?: string;
  /** push of a tag: its name. */
  tag?: string;
  /** Changed files, for `paths` filters (undefined: not computed, the path filters are not applied). */
  paths?: readonly string[];
}

/** The `types` a `pull_request` workflow runs for when it lists none. */
export const DEFAULT_PULL_REQUEST_TYPES = ["opened", "synchronize", "reopened"];

/**
 * Whether a workflow with these `on:` events runs for the event. A filter and its `-ignore` twin
 * together make the workflow invalid: it runs for nothing (GitHub reports a workflow file error).
 */
export function triggers(on: Map<string, EventFilters>, facts: TriggerFacts): boolean {
  const f = on.get(facts.event);
  if (!f) return false;
  for (const key of ["branches", "tags", "paths"]) if (key in f && `${key}-ignore` in f) return false;
  if (facts.event === "pull_request") {
    const types = asPatterns(f.types) ?? DEFAULT_PULL_REQUEST_TYPES;
    if (!facts.action || !types.includes(facts.action)) return false;
  }
  const branches = asPatterns(f.branches);
  const branchesIgnore = asPatterns(f["branches-ignore"]);
  const tags = asPatterns(f.tags);
  const tagsIgnore = asPatterns(f["tags-ignore"]);
  if (facts.tag !== undefined) {
    // Only branch filters given: the workflow does not run for tags (and the reverse for branches).
    if (!tags && !tagsIgnore && (branches || branchesIgnore)) return false;
    if (tags && !matchesPatterns(facts.tag, tags)) return false;
    if (tagsIgnore && matchesPatterns(facts.tag, tagsIgnore)) return false;
    // Path filters are not evaluated for pushes of tags.
    return true;
  }
  if (facts.branch !== undefined) {
    if (facts.event === "push" && !branches && !branchesIgnore && (tags || tagsIgnore)) return false;
    if (branches && !matchesPatterns(facts.branch, branches)) return false;
    if (branchesIgnore && matchesPatterns(facts.branch, branchesIgnore)) return false;
  }
  const paths = asPatterns(f.paths);
  const pathsIgnore = asPatterns(f["paths-ignore"]);
  if (facts.paths && paths && !facts.paths.some((p) => matchesPatterns(p, paths))) return false;
  if (facts.paths && pathsIgnore && facts.paths.length > 0) {
    if (facts.paths.every((p) => matchesPatterns(p, pathsIgnore))) return false;
  }
  return true;
}

/**
 * Whether a commit message tells GitHub to skip `push` and `pull_request` runs: one of the skip
 * strings anywhere, or a last `skip-checks: true` trailer after two empty lines
 * (https://docs.github.com/en/actions/managing-workflow-runs/skipping-workflow-runs).
 */
export function hasSkipInstruction(message: string): boolean {
  if (/\[(skip ci|ci skip|no ci|skip actions|actions skip)\]/.test(message)) return true;
  const text = message.replace(/\s+$/, "");
  const cut = text.lastIndexOf("\n\n\n");
  if (cut < 0) return false;
  const trailers = text.slice(cut + 3).split("\n");
  // The trailers paragraph holds trailers only, and skip-checks must be the last of them.
  if (!trailers.every((l) => /^[A-Za-z0-9-]+:\s?\S/.test(l))) return false;
  return /^skip-checks:\s?true$/.test(trailers[trailers.length - 1]!);
}
