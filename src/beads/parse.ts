import {
  type BeadIssue,
  type BeadParseError,
  type BeadRecord,
  type DeletionEntry,
  isTombstone,
} from "./record.ts";
import { KNOWN_ISSUE_FIELDS } from "./serialize.ts";

/** One line of a JSONL file, in file order. */
export type BeadLine =
  | { kind: "record"; line: number; record: BeadRecord }
  | { kind: "error"; line: number; error: BeadParseError }
  | { kind: "blank"; line: number; raw: string };

export interface ParsedBeads {
  lines: BeadLine[];
  /** Every record, tombstones included, in file order. */
  records: BeadRecord[];
  errors: BeadParseError[];
  /** True when the file ends with a newline (or is empty). */
  trailingNewline: boolean;
}

const BLANK = /^\s*$/;

/** Split into lines without their "\n"; a final newline does not start another line. */
export function splitLines(text: string): { lines: string[]; trailingNewline: boolean } {
  if (text === "") return { lines: [], trailingNewline: true };
  const lines = text.split("\n");
  const trailingNewline = lines[lines.length - 1] === "";
  if (trailingNewline) lines.pop();
  return { lines, trailingNewline };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Parse one line; a string message when it is not a beads record. */
export function parseLine(raw: string): BeadRecord | string {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    return `invalid JSON: ${describe(error)}`;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return "not a JSON object";
  }
  const issue = value as BeadIssue;
  if (typeof issue.id !== "string" || issue.id === "") return 'missing string "id"';
  let known = true;
  for (const key of Object.keys(issue)) {
    if (!KNOWN_ISSUE_FIELDS.has(key)) {
      known = false;
      break;
    }
  }
  return { raw, issue, known };
}

/**
 * Parse a beads 1.x `issues.jsonl`. Never throws: a line that is not a record becomes an error with
 * its 1-based line number and is kept in `lines` so a rewrite writes it back unchanged.
 */
export function parseJsonl(text: string): ParsedBeads {
  const { lines: rawLines, trailingNewline } = splitLines(text);
  const lines: BeadLine[] = [];
  const records: BeadRecord[] = [];
  const errors: BeadParseError[] = [];
  for (let i = 0; i < rawLines.length; i++) {
    const raw = rawLines[i]!;
    const line = i + 1;
    if (BLANK.test(raw)) {
      lines.push({ kind: "blank", line, raw });
      continue;
    }
    const parsed = parseLine(raw);
    if (typeof parsed === "string") {
      const error = { line, message: parsed, raw };
      errors.push(error);
      lines.push({ kind: "error", line, error });
    } else {
      records.push(parsed);
      lines.push({ kind: "record", line, record: parsed });
    }
  }
  return { lines, records, errors, trailingNewline };
}

/**
 * The live issue set, as `bd import` sees it: legacy tombstones (status "tombstone") and ids listed
 * in a legacy deletions manifest are skipped. When an id occurs twice the later line wins
 * (a later tombstone removes it).
 */
export function liveIssues(
  parsed: ParsedBeads | readonly BeadRecord[],
  deleted: ReadonlySet<string> = new Set(),
): BeadIssue[] {
  const records = Array.isArray(parsed) ? (parsed as readonly BeadRecord[]) : (parsed as ParsedBeads).records;
  const byId = new Map<string, BeadIssue>();
  for (const { issue } of records) {
    if (isTombstone(issue) || deleted.has(issue.id)) byId.delete(issue.id);
    else byId.set(issue.id, issue);
  }
  return [...byId.values()];
}

export interface ParsedDeletions {
  entries: DeletionEntry[];
  ids: Set<string>;
  errors: BeadParseError[];
}

/** Parse a legacy `.beads/deletions.jsonl` manifest (`{"id","ts","by","reason"}` per line). */
export function parseDeletionsManifest(text: string): ParsedDeletions {
  const { lines } = splitLines(text);
  const entries: DeletionEntry[] = [];
  const errors: BeadParseError[] = [];
  lines.forEach((raw, i) => {
    if (raw.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      errors.push({ line: i + 1, message: `invalid JSON: ${describe(error)}`, raw });
      return;
    }
    const entry = value as DeletionEntry | null;
    if (entry === null || typeof entry !== "object" || typeof entry.id !== "string" || entry.id === "") {
      errors.push({ line: i + 1, message: 'not a deletion entry (missing string "id")', raw });
      return;
    }
    entries.push(entry);
  });
  return { entries, ids: new Set(entries.map((e) => e.id)), errors };
}
