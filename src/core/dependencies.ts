import { liveLines } from "./markdown-lines.ts";

const KEYWORD = /\b(?:depends\s+on|blocked\s+by)\b\s*:?/gi;
// "#12", "owner/repo#12" or "https://github.com/owner/repo/issues/12" (or /pull/12).
const REF =
  /^(?:(?:https?:\/\/github\.com\/)?([A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+)(?:#|\/(?:issues|pull)\/)|#)(\d{1,9})(?![\w/])/i;
const SEPARATOR = /^\s*(?:,\s*(?:and\s+|&\s*)?|and\s+|&\s*|\s+)/i;
const LIST_ITEM = /^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?/;

/** Reads refs from the start of `text` as long as it is a list of refs ("#1, #2 and #3"). */
function readRefs(text: string, repo: string | undefined, into: Set<number>): number {
  let rest = text;
  let count = 0;
  for (;;) {
    const m = REF.exec(rest);
    if (!m) break;
    const owner = m[1];
    const n = Number(m[2]);
    if (
      (owner === undefined || (repo !== undefined && owner.toLowerCase() === repo.toLowerCase())) &&
      n > 0
    ) {
      into.add(n);
    }
    count++;
    rest = rest.slice(m[0].length);
    const sep = SEPARATOR.exec(rest);
    if (!sep) break;
    rest = rest.slice(sep[0].length);
  }
  return count;
}

/**
 * Issue numbers an issue body says it waits for: `Depends on #12`, `Blocked by #12, #13`,
 * `depends on: #4 and #5`, or the keyword followed by a list (`- #4`) on the next lines.
 * Case-insensitive; code blocks and quotes are ignored. `owner/repo#12` and issue URLs count only
 * when they name `repo` (this repository, "owner/name"); other repositories cannot gate a task here.
 * Sorted, without duplicates.
 */
export function parseDependencies(body: string, repo?: string): number[] {
  const found = new Set<number>();
  const lines = liveLines(body);
  for (let i = 0; i < lines.length; i++) {
    const { line } = lines[i]!;
    KEYWORD.lastIndex = 0;
    for (let m = KEYWORD.exec(line); m !== null; m = KEYWORD.exec(line)) {
      const after = line.slice(m.index + m[0].length).replace(/^\s+/, "");
      if (readRefs(after, repo, found) > 0 || after.trim() !== "") continue;
      // Keyword ends the line: take the list items right below it.
      for (let j = i + 1; j < lines.length && lines[j]!.index === lines[j - 1]!.index + 1; j++) {
        const item = LIST_ITEM.exec(lines[j]!.line);
        if (!item) break;
        readRefs(lines[j]!.line.slice(item[0].length), repo, found);
      }
    }
  }
  return [...found].sort((a, b) => a - b);
}

// A line that says only what the issue waits for ("Depends on #3", "Blocked by: #3 and #4"): the
// lines `fleet bd create --deps` writes, which a change of dependencies rewrites.
const DEPENDENCY_LINE =
  /^\s*(?:depends\s+on|blocked\s+by)\s*:?\s*#\d+(?:\s*(?:,\s*(?:and\s+|&\s*)?|and\s+|&\s*|\s+)#\d+)*\s*$/i;

/**
 * `body` with its lines that only name dependencies replaced by one `Depends on #N` line per
 * dependency in `deps`, at its end. A dependency named in a sentence stays: parseDependencies of the
 * result says whether the body now names exactly `deps`.
 */
export function withDependencyLines(body: string, deps: readonly number[]): string {
  const drop = new Set(
    liveLines(body).flatMap(({ line, index }) => (DEPENDENCY_LINE.test(line) ? [index] : [])),
  );
  const kept = body
    .split(/\r?\n/)
    .filter((_, i) => !drop.has(i))
    .join("\n")
    .replace(/\s+$/, "");
  const lines = [...new Set(deps)].sort((a, b) => a - b).map((n) => `Depends on #${n}`);
  return [kept, lines.join("\n")].filter(Boolean).join("\n\n");
}
