import { parseLine, splitLines } from "./parse.ts";
import type { BeadIssue } from "./record.ts";
import { serializeIssue } from "./serialize.ts";

export interface BeadChanges {
  /** Issues to write: replaces the line with the same id, or adds a new line. */
  upsert: readonly BeadIssue[];
  /** Ids whose lines are dropped (wins over an upsert of the same id). */
  remove?: readonly string[];
}

const ID_PREFIX = '{"id":"';

/**
 * The id of a line without parsing all of it: beads writes `id` first, so `{"id":"..."` is read
 * directly; anything else goes through JSON.parse. Undefined for a line that is not a record.
 */
function lineId(raw: string): string | undefined {
  if (raw.startsWith(ID_PREFIX)) {
    const end = raw.indexOf('"', ID_PREFIX.length);
    const id = end > 0 ? raw.slice(ID_PREFIX.length, end) : "";
    if (id !== "" && !id.includes("\\")) return id;
  }
  if (raw.trim() === "") return undefined;
  const parsed = parseLine(raw);
  return typeof parsed === "string" ? undefined : parsed.issue.id;
}

/** Go compares strings bytewise; for the ASCII ids beads writes this is code-unit order. */
const compareIds = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Apply changes to a beads `issues.jsonl` and return the new text.
 * - Lines not touched keep their exact bytes (malformed lines and tombstones included).
 * - An upserted issue that serializes the same as its current line keeps the current bytes.
 * - New issues go where their id sorts when the file is sorted by id (as `bd export` writes it),
 *   otherwise they are appended in id order.
 * - With no effective change the original text is returned as-is; otherwise it ends with "\n".
 */
export function rewriteJsonl(original: string, changes: BeadChanges): string {
  const removed = new Set(changes.remove ?? []);
  const pending = new Map<string, BeadIssue>();
  for (const issue of changes.upsert) {
    if (!removed.has(issue.id)) pending.set(issue.id, issue);
  }
  const { lines } = splitLines(original);
  const ids = lines.map(lineId);

  let sorted = true;
  let previous: string | undefined;
  for (const id of ids) {
    if (id === undefined) continue;
    if (previous !== undefined && compareIds(previous, id) > 0) {
      sorted = false;
      break;
    }
    previous = id;
  }

  let changed = false;
  let out: string[] = [];
  // Ids of the lines in `out`, for merging new issues into a sorted file.
  const outIds: (string | undefined)[] = [];
  const written = new Set<string>();
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const id = ids[i];
    if (id === undefined) {
      out.push(raw);
      outIds.push(undefined);
      continue;
    }
    if (removed.has(id) && typeof parseLine(raw) !== "string") {
      changed = true;
      continue;
    }
    const next = pending.get(id);
    outIds.push(id);
    if (next === undefined) {
      out.push(raw);
      continue;
    }
    const current = parseLine(raw);
    if (typeof current === "string") {
      // A broken line that merely starts like this id stays as it is; the issue is added anew.
      out.push(raw);
      outIds[outIds.length - 1] = undefined;
      continue;
    }
    if (written.has(id)) {
      // A second line for an id already written: the upsert defines the issue, drop the stale copy.
      outIds.pop();
      changed = true;
      continue;
    }
    written.add(id);
    const line = serializeIssue(next);
    if (line === raw || line === serializeIssue(current.issue)) {
      out.push(raw);
    } else {
      out.push(line);
      changed = true;
    }
  }

  const added = [...pending.values()].filter((issue) => !written.has(issue.id));
  added.sort((a, b) => compareIds(a.id, b.id));
  if (added.length > 0) {
    changed = true;
    if (sorted) {
      const merged: string[] = [];
      let next = 0;
      for (let j = 0; j < out.length; j++) {
        const id = outIds[j];
        while (id !== undefined && next < added.length && compareIds(added[next]!.id, id) < 0) {
          merged.push(serializeIssue(added[next++]!));
        }
        merged.push(out[j]!);
      }
      while (next < added.length) merged.push(serializeIssue(added[next++]!));
      out = merged;
    } else {
      for (const issue of added) out.push(serializeIssue(issue));
    }
  }

  if (!changed) return original;
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
}
