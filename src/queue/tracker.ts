import { redactSecrets } from "../core/redact.ts";
import type { GitHubClient, RepoRef } from "../github/client.ts";
import { upsertMarkedComment } from "../github/upsert-comment.ts";
import { trackingMarker } from "../render/markers.ts";
import { renderTrackingComment, type TrackingView } from "../render/tracking-comment.ts";

export interface TrackerOptions {
  octokit: GitHubClient;
  repo: RepoRef;
  clock?: () => number;
  /** At most one edit per task in this window (GitHub counts comment edits as content writes). */
  minIntervalMs?: number;
}

export interface Tracker {
  /** Shows the view now, or at the end of the task's throttle window (the latest view wins). */
  show(issue: number, view: TrackingView, opts?: { fresh?: boolean }): Promise<void>;
  /** The task's tracking comment is this one (found in a listing made for another purpose). */
  remember(taskKey: string, commentId: number): void;
  /** Writes every view still waiting for its window. */
  flush(): Promise<void>;
  readonly edits: number;
}

interface Slot {
  lastWrite: number;
  /** The comment's id once known; null when the task is new, so no comment can carry its marker yet. */
  commentId?: number | null;
  pending?: { issue: number; view: TrackingView };
  timer?: NodeJS.Timeout;
  writing: Promise<void>;
}

/** The task's one tracking comment, found by its marker, edited in place and throttled per task. */
export function createTracker(opts: TrackerOptions): Tracker {
  const clock = opts.clock ?? Date.now;
  const minInterval = opts.minIntervalMs ?? 15_000;
  const slots = new Map<string, Slot>();
  let edits = 0;

  const write = (key: string, slot: Slot): Promise<void> => {
    const job = slot.pending;
    slot.pending = undefined;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = undefined;
    if (!job) return slot.writing;
    slot.lastWrite = clock();
    slot.writing = slot.writing.then(async () => {
      const result = await upsertMarkedComment(
        opts.octokit,
        { ...opts.repo, issue_number: job.issue },
        trackingMarker(key),
        // Reasons come from many places (commands, GitHub errors, runs): none may carry a secret out.
        redactSecrets(renderTrackingComment(job.view)),
        slot.commentId,
      );
      slot.commentId = result.id;
      edits++;
    });
    return slot.writing;
  };

  return {
    get edits() {
      return edits;
    },
    async show(issue, view, opts = {}) {
      const key = view.taskKey;
      let slot = slots.get(key);
      if (!slot) {
        // A task created by this very commit has a new id: there is no comment to look for.
        slot = {
          lastWrite: Number.NEGATIVE_INFINITY,
          writing: Promise.resolve(),
          ...(opts.fresh ? { commentId: null } : {}),
        };
        slots.set(key, slot);
      }
      slot.pending = { issue, view };
      const wait = slot.lastWrite + minInterval - clock();
      if (wait <= 0) return write(key, slot);
      if (!slot.timer) {
        const s = slot;
        s.timer = setTimeout(() => void write(key, s).catch(() => {}), wait);
        s.timer.unref?.();
      }
    },
    remember(taskKey, commentId) {
      const slot = slots.get(taskKey);
      if (slot) {
        if (typeof slot.commentId !== "number") slot.commentId = commentId;
      } else
        slots.set(taskKey, { lastWrite: Number.NEGATIVE_INFINITY, writing: Promise.resolve(), commentId });
    },
    async flush() {
      await Promise.all([...slots.entries()].map(([key, slot]) => write(key, slot)));
    },
  };
}
