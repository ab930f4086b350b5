/**
 * beads 1.x export records, typed with beads' own JSON field names (internal/types/types.go,
 * `types.Issue`). Times are RFC3339 strings as written; fields Fleet does not know are kept through
 * the index signature and written back unchanged.
 */

/** `types.Dependency`: stored on the dependent issue; `depends_on_id` is the blocker / parent. */
export interface BeadDependency {
  issue_id: string;
  depends_on_id: string;
  /** "blocks" | "parent-child" | "related" | "discovered-from" | "conditional-blocks" | "waits-for" | ... */
  type: string;
  created_at: string;
  created_by?: string;
  /** Type-specific edge data; beads stores it as a JSON string. */
  metadata?: unknown;
  thread_id?: string;
  [field: string]: unknown;
}

/** `types.Comment`. Pre-1.0 exports wrote an integer id, 1.x a string; both are kept as read. */
export interface BeadComment {
  id: number | string;
  issue_id: string;
  author: string;
  text: string;
  created_at: string;
  [field: string]: unknown;
}

/** beads statuses (1.x built-ins plus the legacy "tombstone"); custom statuses are plain strings. */
export type BeadStatus =
  | "open"
  | "in_progress"
  | "blocked"
  | "deferred"
  | "closed"
  | "pinned"
  | "hooked"
  | "tombstone"
  | (string & {});

export interface BeadIssue {
  id: string;
  title: string;
  description?: string;
  design?: string;
  acceptance_criteria?: string;
  notes?: string;
  status?: BeadStatus;
  /** 0 (critical) .. 4 (backlog); always written. */
  priority: number;
  issue_type?: string;
  assignee?: string;
  owner?: string;
  estimated_minutes?: number;
  created_at: string;
  created_by?: string;
  updated_at: string;
  started_at?: string;
  closed_at?: string;
  close_reason?: string;
  defer_until?: string;
  due_at?: string;
  /** e.g. "gh-12". */
  external_ref?: string;
  /** Arbitrary JSON; Fleet's own fields live under `metadata.fleet`. */
  metadata?: Record<string, unknown>;
  labels?: string[];
  dependencies?: BeadDependency[];
  comments?: BeadComment[];
  /** Legacy soft delete (status "tombstone"). */
  deleted_at?: string;
  deleted_by?: string;
  delete_reason?: string;
  original_type?: string;
  pinned?: boolean;
  ephemeral?: boolean;
  [field: string]: unknown;
}

/** One parsed JSONL line. `known` is false when the line carries fields Fleet does not model. */
export interface BeadRecord {
  /** The line exactly as read, without its newline. */
  raw: string;
  issue: BeadIssue;
  known: boolean;
}

/** A line that is not a beads record; it is reported, never thrown, and kept as-is on rewrite. */
export interface BeadParseError {
  /** 1-based line number. */
  line: number;
  message: string;
  raw: string;
}

/** Legacy `.beads/deletions.jsonl` entry (removed from beads in Dec 2025). */
export interface DeletionEntry {
  id: string;
  ts?: string;
  by?: string;
  reason?: string;
  [field: string]: unknown;
}

export const isTombstone = (issue: BeadIssue): boolean => issue.status === "tombstone";
