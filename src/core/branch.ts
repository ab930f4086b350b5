export const BRANCH_PREFIX = "fleet/";
export const MAX_SLUG_LENGTH = 40;
/** GitHub's limit on an issue or comment body, in characters. */
export const GITHUB_BODY_LIMIT = 65_536;

/**
 * A git- and shell-safe slug: ASCII lowercase letters, digits and single dashes, at most 40 characters.
 * Accents are folded ("Café" -> "cafe"); everything else becomes a dash.
 */
export function slugify(title: string, maxLength = MAX_SLUG_LENGTH): string {
  const ascii = title
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase();
  const slug = ascii.replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  return slug.slice(0, maxLength).replace(/-+$/, "");
}

/**
 * The task's branch, `fleet/<issue>-<slug>` (`fleet/<issue>` when the title has no usable characters).
 * The slug contains no dots, so `..` and a `.lock` suffix cannot occur, and no shell metacharacters.
 */
export function taskBranchName(issue: number, title: string): string {
  if (!Number.isInteger(issue) || issue <= 0) {
    throw new RangeError(`taskBranchName: issue must be a positive whole number, got ${issue}`);
  }
  const slug = slugify(title);
  return slug ? `${BRANCH_PREFIX}${issue}-${slug}` : `${BRANCH_PREFIX}${issue}`;
}

/**
 * The branch of one side of an A/B run (the issue carries several coder/model labels):
 * `fleet/<issue>-<slug>-<coder>-<model>`, so each side gets its own branch and PR.
 */
export function variantBranchName(issue: number, title: string, coder: string, model: string): string {
  const variant = slugify(`${coder}-${model}`, 30);
  return variant ? `${taskBranchName(issue, title)}-${variant}` : taskBranchName(issue, title);
}

const FENCE = /^ {0,3}(```|~~~)/;

/**
 * Text that fits a GitHub body: unchanged when short enough; otherwise cut at the last line break
 * before the limit (mid-line only when a single line is too long), an open code fence closed, and a
 * note appended saying how much was cut. The result is never longer than `max`.
 */
export function truncateForGitHub(
  text: string,
  max = GITHUB_BODY_LIMIT,
  where = "the full log is in the run's artifacts",
): string {
  if (text.length <= max) return text;
  const noteFor = (cut: number) => `\n\n_… ${cut.toLocaleString("en-US")} characters truncated; ${where}._`;
  // Room for the note (sized for the largest possible count) and a closing fence.
  const reserve = noteFor(text.length).length + 4;
  if (reserve >= max) return text.slice(0, max);
  let end = text.lastIndexOf("\n", max - reserve);
  if (end <= 0) end = max - reserve;
  // Never split a surrogate pair.
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  let kept = text.slice(0, end);
  let fences = 0;
  for (const line of kept.split("\n")) if (FENCE.test(line)) fences++;
  if (fences % 2 === 1) kept += "\n```";
  return kept + noteFor(text.length - end);
}
