import { boundText } from "./published-text.ts";

/**
 * Discovered work: the follow-ups an agent lists in RESULT.json become issues of their own. Each
 * issue carries a hidden marker with the task and a key of the follow-up's text, so processing the
 * same run again finds the issues it already filed instead of filing them twice. A run files at most
 * `max_follow_ups` of them, and an agent's follow-ups queue work by themselves one generation deep:
 * those found while working on an agent's own work wait for a person's label.
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
  /** The task is itself an agent's work (a follow-up Fleet filed, a split's sub-issue): see mayQueueDiscovered. */
  taskIsAgentWork?: boolean;
  /** At most this many follow-ups of the run are filed (`max_follow_ups`). */
  maxFollowUps: number;
  /** Bodies of issues already on GitHub that may carry Fleet's markers. */
  existingBodies: readonly string[];
}

const TITLE_MAX = 80;
/** The most of one follow-up's text an issue quotes (the whole stays in the run's RESULT.json). */
const TEXT_MAX = 10_000;

export const discoveredMarker = (taskId: string, key: string): string =>
  `<!-- fleet:discovered-from ${taskId} ${key} -->`;

/** Whether a text (an issue's body, a bead's description) carries the marker of a follow-up Fleet filed. */
export const carriesDiscoveredMarker = (text: string | null | undefined): boolean =>
  typeof text === "string" && /<!-- fleet:discovered-from \S+ [0-9a-f]{16} -->/.test(text);

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
  v: { taskId: string; issue: number; pr?: number; coderLabel: string; key: string; chainStopped?: boolean },
): string {
  const where = v.pr !== undefined ? `#${v.issue} (pull request #${v.pr})` : `#${v.issue}`;
  const stopped = v.chainStopped
    ? `Fleet did not queue this one: #${v.issue} is itself work an agent wrote (a follow-up or a split Fleet filed), and an agent's follow-ups are queued by themselves one generation deep only. `
    : "";
  return [
    `Discovered while working on ${where}.`,
    "",
    boundText(text.trim(), TEXT_MAX, `The whole follow-up: \`fleet task ${v.taskId} result\`.`),
    "",
    `<sub>Filed by Fleet from the follow-ups of task \`${v.taskId}\`. ${stopped}Add the \`${v.coderLabel}\` label to have an agent work on it.</sub>`,
    "",
    discoveredMarker(v.taskId, v.key),
  ].join("\n");
}

/**
 * Whether the run's follow-ups are labelled and queued by themselves: with `auto_label_discovered`,
 * unless the task is itself an agent's work. Then queuing them would chain agent work onto agent
 * work with no person in between, without end.
 */
export function mayQueueDiscovered(v: { autoLabel: boolean; taskIsAgentWork?: boolean }): boolean {
  return v.autoLabel && !v.taskIsAgentWork;
}

/**
 * The follow-ups a run files, in the agent's order: blank and repeated ones dropped, then at most
 * `max`; `leftOut` counts the distinct ones past it.
 */
export function followUpsToFile(
  followUps: readonly string[],
  max: number,
): { file: string[]; leftOut: number } {
  const seen = new Set<string>();
  const distinct: string[] = [];
  for (const text of followUps) {
    if (!text.trim() || !followUpTitle(text)) continue;
    const key = followUpKey(text);
    if (seen.has(key)) continue;
    seen.add(key);
    distinct.push(text);
  }
  const keep = Math.max(0, max);
  return { file: distinct.slice(0, keep), leftOut: Math.max(0, distinct.length - keep) };
}

/** The line a run's report and pull request carry when `max_follow_ups` left follow-ups out; else undefined. */
export function followUpCapNote(cap: { leftOut: number }, max: number): string | undefined {
  if (cap.leftOut === 0) return undefined;
  const were = `${cap.leftOut} ${cap.leftOut === 1 ? "was" : "were"} left out`;
  if (max <= 0) return `Fleet files no follow-ups as issues (\`max_follow_ups\` is 0): ${were}.`;
  return max === 1
    ? `Fleet files at most 1 follow-up of a run as an issue (\`max_follow_ups\`): ${were}.`
    : `Fleet files at most ${max} follow-ups of a run as issues (\`max_follow_ups\`): ${were}.`;
}

/**
 * The issues to file for a run's follow-ups: blank and repeated follow-ups are skipped, and so is
 * any follow-up whose issue already exists (found by its marker in `existingBodies`).
 */
export function planDiscoveredIssues(input: DiscoveredInput): DiscoveredIssue[] {
  const out: DiscoveredIssue[] = [];
  const queue = mayQueueDiscovered(input);
  // The cap is on the run's list, not on what is new: processing the run again files nothing more.
  for (const text of followUpsToFile(input.followUps, input.maxFollowUps).file) {
    const key = followUpKey(text);
    const marker = discoveredMarker(input.taskId, key);
    if (input.existingBodies.some((b) => b.includes(marker))) continue;
    out.push({
      key,
      title: followUpTitle(text),
      body: discoveredBody(text, { ...input, key, chainStopped: input.autoLabel && !queue }),
      labels: queue ? [input.coderLabel] : [],
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
