/**
 * Hidden markers let Fleet find its own comments again (to edit them in place) without storing
 * comment ids anywhere: a redelivered webhook finds the marker and edits rather than re-posts.
 */
export const trackingMarker = (taskKey: string): string => `<!-- fleet:tracking ${taskKey} -->`;
export const labelErrorMarker = (label: string): string =>
  `<!-- fleet:label-error ${encodeURIComponent(label.toLowerCase())} -->`;
export const noticeMarker = (kind: string): string => `<!-- fleet:notice ${kind} -->`;

/**
 * Whether `body` is the comment `marker` names: Fleet writes the marker as a comment's first line, and
 * only there does it count. A marker further down is text Fleet published (an agent's plan or report
 * quoting one) and must not redirect Fleet's edits to that comment.
 */
export const hasMarker = (body: string | undefined | null, marker: string): boolean =>
  typeof body === "string" && body.trimStart().startsWith(marker);
