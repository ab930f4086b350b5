import { redactSecrets } from "../core/redact.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { hasMarker, trackingMarker } from "../render/markers.ts";
import { GITHUB_COMMENT_LIMIT, truncateMiddle } from "../render/run-report.ts";
import {
  composeTrackingComment,
  renderTrackingComment,
  type TrackingSections,
  type TrackingView,
  trackingHeaderOf,
  trackingSectionsOf,
} from "../render/tracking-comment.ts";

export interface TrackerOptions {
  github: GitHub;
  repo: RepoRef;
  clock?: () => number;
  /** At most one edit per task in this window (GitHub counts comment edits as content writes). */
  minIntervalMs?: number;
  /** Local mode: the comments speak of `fleet` commands (see TrackingView.local). */
  local?: boolean;
}

export interface ShowOptions {
  /** The task was created by this very commit: no comment can carry its marker yet. */
  fresh?: boolean;
  /**
   * A run elsewhere may have written the comment's sections since this process last saw it (the task
   * comes from a run's state): the comment is read before the edit, so its plan and report stay.
   */
  othersMayHaveWritten?: boolean;
}

/** A run's change to the sections of its tracking comment, applied to what the comment holds. */
export type SectionsEdit = (current: TrackingSections) => TrackingSections;

export interface Tracker {
  /** Shows the view now, or at the end of the task's throttle window (the latest view wins). */
  show(issue: number, view: TrackingView, opts?: ShowOptions): Promise<void>;
  /**
   * The run in this process writes the sections (plan, report) of the task's comment: `edit` is applied
   * to the sections the comment holds when the next `show` or `flush` writes it, below the state.
   */
  setSections(issue: number, taskKey: string, edit: SectionsEdit): void;
  /** Writes the task's comment (its sections as set) at the end of its throttle window, or now when it is over. */
  touch(issue: number, taskKey: string): Promise<void>;
  /** The task's tracking comment is this one (found in a listing made for another purpose, with its body). */
  remember(taskKey: string, commentId: number, body?: string | null): void;
  /** Writes every view (or only `taskKey`'s) still waiting for its window. */
  flush(taskKey?: string): Promise<void>;
  readonly edits: number;
}

interface Slot {
  lastWrite: number;
  /** The comment's id once known; null when there is none yet (the task is new). */
  commentId?: number | null;
  pending?: { issue: number; view?: TrackingView; othersMayHaveWritten: boolean };
  timer?: NodeJS.Timeout;
  writing: Promise<void>;
  /** The sections as the comment holds them, as far as this process knows. */
  sections: TrackingSections;
  /** Whether `sections` are what the comment holds (this process wrote or read them since a run could). */
  sectionsKnown: boolean;
  /** A run in this process writes the sections: nobody else does while it runs. */
  runHere: boolean;
  /** That run's edits not written yet. */
  own?: SectionsEdit;
}

const newSlot = (commentId?: number | null): Slot => ({
  lastWrite: Number.NEGATIVE_INFINITY,
  writing: Promise.resolve(),
  sections: {},
  // A comment about to be created has no sections; an unknown one is read before the first edit.
  sectionsKnown: commentId === null,
  runHere: false,
  ...(commentId !== undefined ? { commentId } : {}),
});

/** What the comment holds now: its id and body (listed by marker when the id is unknown). */
async function readComment(
  opts: TrackerOptions,
  key: string,
  slot: Slot,
  issue: number,
): Promise<string | undefined> {
  const { github } = opts;
  if (slot.commentId === null) return undefined;
  if (slot.commentId === undefined) {
    const comments = await github.issues.listComments(opts.repo, issue);
    // Only a bot's comment counts, so a person quoting the marker cannot redirect Fleet's edits.
    const found = comments.find((c) => c.user?.type === "Bot" && hasMarker(c.body, trackingMarker(key)));
    slot.commentId = found?.id ?? null;
    return found?.body ?? undefined;
  }
  const comment = await github.issues.getComment(opts.repo, slot.commentId);
  return comment.body ?? undefined;
}

/**
 * Writes the comment: the state `header` and the sections with the run's edits applied; true when it
 * was edited or created (false when it already read so). The run's edits are taken first: edits made
 * while the write is under way start a chain of their own and go out with the next write; a failed
 * write puts the taken ones back under them.
 */
async function writeBody(
  opts: TrackerOptions,
  slot: Slot,
  issue: number,
  header: string,
  current: string | undefined,
): Promise<boolean> {
  const taken = slot.own;
  slot.own = undefined;
  const sections = taken ? taken(slot.sections) : slot.sections;
  // Reasons come from many places (commands, GitHub errors, runs): none may carry a secret out.
  const body = truncateMiddle(redactSecrets(composeTrackingComment(header, sections)), GITHUB_COMMENT_LIMIT);
  try {
    let wrote = false;
    if (body !== current) {
      if (typeof slot.commentId === "number") {
        await opts.github.issues.updateComment(opts.repo, slot.commentId, body);
      } else {
        const created = await opts.github.issues.createComment(opts.repo, issue, body);
        slot.commentId = created.id;
      }
      wrote = true;
    }
    slot.sections = sections;
    return wrote;
  } catch (error) {
    // Read again: edits may have come while the write was under way.
    const later = slot.own as SectionsEdit | undefined;
    if (taken) slot.own = later ? (s) => later(taken(s)) : taken;
    throw error;
  }
}

/**
 * The task's one comment on its issue, found by its marker and edited in place, throttled per task: its
 * state (from the queue's views), and the plan and report of its run below (see TrackingSections). One
 * comment for all of it: every comment is a content-creating request.
 */
export function createTracker(opts: TrackerOptions): Tracker {
  const clock = opts.clock ?? Date.now;
  const minInterval = opts.minIntervalMs ?? 15_000;
  const slots = new Map<string, Slot>();
  let edits = 0;

  const writeOnce = async (key: string, slot: Slot, job: NonNullable<Slot["pending"]>): Promise<void> => {
    let header = job.view
      ? renderTrackingComment(opts.local ? { ...job.view, local: true } : job.view)
      : undefined;
    const stale = !slot.sectionsKnown || (job.othersMayHaveWritten && !slot.runHere);
    let current: string | undefined;
    if (slot.commentId === undefined || stale || header === undefined) {
      current = await readComment(opts, key, slot, job.issue);
      slot.sections = trackingSectionsOf(current);
      slot.sectionsKnown = true;
      header ??= current === undefined ? undefined : trackingHeaderOf(current);
    }
    // Sections with no state to show them under and no comment yet: the next view brings the state.
    if (header === undefined) return;
    if (await writeBody(opts, slot, job.issue, header, current)) edits++;
  };

  const write = (key: string, slot: Slot): Promise<void> => {
    const job = slot.pending;
    slot.pending = undefined;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = undefined;
    if (!job) return slot.writing;
    slot.lastWrite = clock();
    slot.writing = slot.writing.then(() => writeOnce(key, slot, job));
    return slot.writing;
  };

  /** Writes now when the task's window is over, else once when it ends (the latest content wins). */
  const whenWindowEnds = async (key: string, slot: Slot): Promise<void> => {
    const wait = slot.lastWrite + minInterval - clock();
    if (wait <= 0) return write(key, slot);
    if (!slot.timer) {
      slot.timer = setTimeout(() => void write(key, slot).catch(() => {}), wait);
      slot.timer.unref?.();
    }
  };

  const slotOf = (key: string, commentId?: number | null): Slot => {
    let slot = slots.get(key);
    if (!slot) {
      slot = newSlot(commentId);
      slots.set(key, slot);
    }
    return slot;
  };

  return {
    get edits() {
      return edits;
    },
    async show(issue, view, showOpts = {}) {
      const key = view.taskKey;
      const slot = slotOf(key, showOpts.fresh ? null : undefined);
      slot.pending = {
        issue,
        view,
        othersMayHaveWritten:
          (slot.pending?.othersMayHaveWritten ?? false) || !!showOpts.othersMayHaveWritten,
      };
      return whenWindowEnds(key, slot);
    },
    setSections(issue, taskKey, edit) {
      const slot = slotOf(taskKey);
      slot.runHere = true;
      const earlier = slot.own;
      slot.own = earlier ? (s) => edit(earlier(s)) : edit;
      slot.pending = {
        issue,
        view: slot.pending?.view,
        othersMayHaveWritten: slot.pending?.othersMayHaveWritten ?? false,
      };
    },
    async touch(_issue, taskKey) {
      const slot = slots.get(taskKey);
      if (slot?.pending) return whenWindowEnds(taskKey, slot);
    },
    remember(taskKey, commentId, body) {
      const slot = slotOf(taskKey, commentId);
      if (typeof slot.commentId !== "number") slot.commentId = commentId;
      if (body !== undefined) {
        slot.sections = trackingSectionsOf(body);
        slot.sectionsKnown = true;
      }
    },
    async flush(taskKey) {
      const entries = taskKey === undefined ? [...slots.entries()] : [[taskKey, slots.get(taskKey)] as const];
      await Promise.all(entries.map(([key, slot]) => (slot ? write(key, slot) : undefined)));
    },
  };
}
