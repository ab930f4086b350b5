import type { BeadComment, BeadDependency, BeadIssue } from "./record.ts";
import { GO_ZERO_TIME, isZeroTime, normalizeTime } from "./time.ts";

/**
 * How Go's encoding/json writes a field of `types.Issue`:
 * - always: no omitempty (id, title, priority) — written even when zero ("" / 0)
 * - str: string,omitempty — omitted when ""
 * - ptr: pointer,omitempty (*int, *string) — omitted only when absent; 0 and "" are written
 * - int: int,omitempty — omitted when 0
 * - bool: bool,omitempty — omitted when false
 * - list: slice,omitempty — omitted when empty
 * - time: time.Time without omitempty — always written, Go's zero time when absent
 * - ptime: *time.Time,omitempty — omitted when absent (and, Fleet's choice, when the zero time)
 * - raw: json.RawMessage,omitempty — omitted when absent
 */
type FieldKind =
  | "always"
  | "str"
  | "ptr"
  | "int"
  | "bool"
  | "list"
  | "time"
  | "ptime"
  | "raw"
  | "deps"
  | "comments";

/**
 * `types.Issue` fields in struct order, from steveyegge/beads (now gastownhall/beads)
 * internal/types/types.go at 1.x. The legacy tombstone fields (deleted_at .. original_type) sit
 * where pre-1.0 structs had them: after comments, before sender.
 */
export const ISSUE_FIELDS: ReadonlyArray<readonly [string, FieldKind]> = [
  ["id", "always"],
  ["title", "always"],
  ["description", "str"],
  ["design", "str"],
  ["acceptance_criteria", "str"],
  ["notes", "str"],
  ["spec_id", "str"],
  ["status", "str"],
  ["priority", "always"],
  ["issue_type", "str"],
  ["assignee", "str"],
  ["owner", "str"],
  ["estimated_minutes", "ptr"],
  ["created_at", "time"],
  ["created_by", "str"],
  ["updated_at", "time"],
  ["started_at", "ptime"],
  ["closed_at", "ptime"],
  ["close_reason", "str"],
  ["closed_by_session", "str"],
  ["lease_expires_at", "ptime"],
  ["heartbeat_at", "ptime"],
  ["due_at", "ptime"],
  ["defer_until", "ptime"],
  ["external_ref", "ptr"],
  ["source_system", "str"],
  ["metadata", "raw"],
  ["compaction_level", "int"],
  ["compacted_at", "ptime"],
  ["compacted_at_commit", "ptr"],
  ["original_size", "int"],
  ["labels", "list"],
  ["dependencies", "deps"],
  ["comments", "comments"],
  ["deleted_at", "ptime"],
  ["deleted_by", "str"],
  ["delete_reason", "str"],
  ["original_type", "str"],
  ["sender", "str"],
  ["ephemeral", "bool"],
  ["no_history", "bool"],
  ["wisp_type", "str"],
  ["pinned", "bool"],
  ["is_template", "bool"],
  ["bonded_from", "list"],
  ["await_type", "str"],
  ["await_id", "str"],
  ["timeout", "int"],
  ["waiters", "list"],
  ["source_formula", "str"],
  ["source_location", "str"],
  ["mol_type", "str"],
  ["work_type", "str"],
  ["event_kind", "str"],
  ["actor", "str"],
  ["target", "str"],
  ["payload", "str"],
];

/** `types.Dependency` fields in struct order. */
const DEPENDENCY_FIELDS: ReadonlyArray<readonly [string, FieldKind]> = [
  ["issue_id", "always"],
  ["depends_on_id", "always"],
  ["type", "always"],
  ["created_at", "time"],
  ["created_by", "str"],
  ["metadata", "str"],
  ["thread_id", "str"],
];

/** `types.Comment` fields in struct order. */
const COMMENT_FIELDS: ReadonlyArray<readonly [string, FieldKind]> = [
  ["id", "always"],
  ["issue_id", "always"],
  ["author", "always"],
  ["text", "always"],
  ["created_at", "time"],
];

export const KNOWN_ISSUE_FIELDS: ReadonlySet<string> = new Set(ISSUE_FIELDS.map(([name]) => name));

const HTML_UNSAFE = /[<>&\u2028\u2029]/g;
const GO_ESCAPES: Record<string, string> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};

/**
 * JSON as Go's json.Marshal writes it: JSON.stringify plus Go's HTML-safe escapes of <, >, & and
 * U+2028/2029 (beads exports contain "\u003c"). Those characters only occur inside JSON strings,
 * so replacing them in the whole text is safe.
 */
export function goJson(value: unknown): string {
  const text = JSON.stringify(value) ?? "null";
  return text.replace(HTML_UNSAFE, (ch) => GO_ESCAPES[ch] ?? ch);
}

function isEmptyForKind(kind: FieldKind, value: unknown): boolean {
  if (value === undefined || value === null) return kind !== "always" && kind !== "time";
  switch (kind) {
    case "str":
      return value === "";
    case "int":
      return value === 0;
    case "bool":
      return value === false;
    case "list":
    case "deps":
    case "comments":
      return Array.isArray(value) && value.length === 0;
    case "ptime":
      return typeof value === "string" && (value === "" || isZeroTime(value));
    default:
      return false;
  }
}

function encodeValue(kind: FieldKind, name: string, value: unknown): string {
  switch (kind) {
    case "time":
      return goJson(typeof value === "string" && value !== "" ? normalizeTime(value) : GO_ZERO_TIME);
    case "ptime":
      return goJson(typeof value === "string" ? normalizeTime(value) : value);
    case "always":
      if (value === undefined || value === null) return name === "priority" ? "0" : '""';
      return goJson(value);
    case "deps":
      return Array.isArray(value) ? `[${value.map((d) => serializeDependency(d)).join(",")}]` : goJson(value);
    case "comments":
      return Array.isArray(value) ? `[${value.map((c) => serializeComment(c)).join(",")}]` : goJson(value);
    default:
      return goJson(value);
  }
}

function writeObject(
  object: Record<string, unknown>,
  fields: ReadonlyArray<readonly [string, FieldKind]>,
  known: ReadonlySet<string>,
): string {
  const parts: string[] = [];
  for (const [name, kind] of fields) {
    const value = object[name];
    if (isEmptyForKind(kind, value)) continue;
    parts.push(`${goJson(name)}:${encodeValue(kind, name, value)}`);
  }
  // Fields Fleet does not model follow the struct's fields in the order they were read (this is
  // also where `bd export` puts its computed dependency_count / dependent_count / comment_count).
  for (const name of Object.keys(object)) {
    if (known.has(name)) continue;
    const value = object[name];
    if (value === undefined) continue;
    parts.push(`${goJson(name)}:${goJson(value)}`);
  }
  return `{${parts.join(",")}}`;
}

const DEPENDENCY_KNOWN = new Set(DEPENDENCY_FIELDS.map(([n]) => n));
const COMMENT_KNOWN = new Set(COMMENT_FIELDS.map(([n]) => n));

function serializeDependency(dep: BeadDependency): string {
  // beads stores edge metadata as a JSON string; an object handed in by a caller is written as JSON.
  if (dep.metadata !== undefined && typeof dep.metadata !== "string") {
    const { metadata, ...rest } = dep;
    return writeObject({ ...rest, metadata: JSON.stringify(metadata) }, DEPENDENCY_FIELDS, DEPENDENCY_KNOWN);
  }
  return writeObject(dep, DEPENDENCY_FIELDS, DEPENDENCY_KNOWN);
}

function serializeComment(comment: BeadComment): string {
  return writeObject(comment, COMMENT_FIELDS, COMMENT_KNOWN);
}

/** One beads export line (no newline) for an issue. */
export function serializeIssue(issue: BeadIssue): string {
  return writeObject(issue, ISSUE_FIELDS, KNOWN_ISSUE_FIELDS);
}
