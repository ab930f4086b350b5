/**
 * Discovered work: the follow-ups an agent lists in RESULT.json become issues of their own. Each
 * issue carries a hidden marker with the task and a key of the follow-up's text, so processing the
 * same run again finds the issues it already filed instead of filing them twice.
 */

export interface DiscoveredIssue {
  /** Stable key of the follow-up's text (whitespace and case do not matter). */
  key: string;
  title: string;
  body: string;
  labels: string[];
}

export interface DiscoveredInput {
  followUps: readonly string[];
  taskId: string;
  /** The task's issue and its pull request, if the run opened one. */
  issue: number;
  pr?: number;
  /** The task's coder label (`fleet:claude`), given to the new issues only with `autoLabel`. */
  coderLabel: string;
  autoLabel: boolean;
  /** Bodies of issues already on GitHub that may carry Fleet's markers. */
  existingBodies: readonly string[];
}

const TITLE_MAX = 80;

export const discoveredMarker = (taskId: string, key: string): string =>
  `<!-- fleet:discovered-from ${taskId} ${key} -->`;

/** FNV-1a over the normalized text, twice with different seeds: 16 hex digits, no crypto needed. */
export function followUpKey(text: string): string {
  const norm = text.trim().replace(/\s+/g, " ").toLowerCase();
  const fnv = (seed: number) => {
    let h = seed >>> 0;
    for (let i = 0; i < norm.length; i++) {
      h ^= norm.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h.toString(16).padStart(8, "0");
  };
  return `${fnv(0x811c9dc5)}${fnv(0x01000193)}`;
}

/** The first line of the follow-up, without list markers, cut to a title's length. */
export function followUpTitle(text: string): string {
  const first = (text.trim().split("\n")[0] ?? "").replace(/^([-*+]|\d+[.)])\s+/, "").trim();
  const title = first.length > TITLE_MAX ? `${first.slice(0, TITLE_MAX - 1).trimEnd()}…` : first;
  return title.replace(/[.:;,]$/, "");
}

export function discoveredBody(
  text: string,
  v: { taskId: string; issue: number; pr?: number; coderLabel: string; key: string },
): string {
  const where = v.pr !== undefined ? `#${v.issue} (pull request #${v.pr})` : `#${v.issue}`;
  return [
    `Discovered while working on ${where}.`,
    "",
    text.trim(),
    "",
    `<sub>Filed by Fleet from the follow-ups of task \`${v.taskId}\`. Add the \`${v.coderLabel}\` label to have an agent work on it.</sub>`,
    "",
    discoveredMarker(v.taskId, v.key),
  ].join("\n");
}

/**
 * The issues to file for a run's follow-ups: blank and repeated follow-ups are skipped, and so is
 * any follow-up whose issue already exists (found by its marker in `existingBodies`).
 */
export function planDiscoveredIssues(input: DiscoveredInput): DiscoveredIssue[] {
  const out: DiscoveredIssue[] = [];
  const seen = new Set<string>();
  for (const text of input.followUps) {
    if (!text.trim() || !followUpTitle(text)) continue;
    const key = followUpKey(text);
    if (seen.has(key)) continue;
    seen.add(key);
    const marker = discoveredMarker(input.taskId, key);
    if (input.existingBodies.some((b) => b.includes(marker))) continue;
    out.push({
      key,
      title: followUpTitle(text),
      body: discoveredBody(text, { ...input, key }),
      labels: input.autoLabel ? [input.coderLabel] : [],
    });
  }
  return out;
}

/** The keys of follow-ups already filed for a task, read from issue bodies (with their numbers). */
export function filedDiscoveries(
  taskId: string,
  issues: ReadonlyArray<{ number: number; body?: string | null }>,
): Map<string, number> {
  const found = new Map<string, number>();
  const re = new RegExp(
    `<!-- fleet:discovered-from ${taskId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} ([0-9a-f]{16}) -->`,
  );
  for (const i of issues) {
    const m = re.exec(i.body ?? "");
    if (m) found.set(m[1]!, i.number);
  }
  return found;
}
