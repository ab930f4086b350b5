/**
 * The repository files an issue names, for `serialize_overlapping`. The scheduler decides before any
 * agent has run, so the issue body is the only plan there is: a path counts when it is written in
 * backticks (`src/a.ts`, `README.md`) or, written bare, when it has a folder and an extension
 * (src/core/config.ts). URLs, `#12` references and version numbers are not paths. Leading `./` is
 * dropped; the result is sorted and unique.
 */
export function filesNamedIn(text: string): string[] {
  const found = new Set<string>();
  const add = (raw: string, bare: boolean) => {
    const path = normalizePath(raw);
    if (path === undefined) return;
    if (bare && !path.includes("/")) return;
    found.add(path);
  };
  for (const m of text.matchAll(/`([^`\n]+)`/g)) add(m[1]!.trim(), false);
  const withoutCode = text.replace(/```[\s\S]*?```/g, " ").replace(/`[^`\n]*`/g, " ");
  for (const m of withoutCode.matchAll(/(?<![\w/.:-])((?:\.\/)?[\w.-]+(?:\/[\w.-]+)+)/g)) add(m[1]!, true);
  return [...found].sort();
}

const SEGMENT = /^[\w.-]+$/;
// The extension starts with a letter: "v1.2" or "3.14" is a number, not a file.
const FILE_NAME = /^[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,9}$|^(Makefile|Dockerfile|LICENSE)$/;

function normalizePath(raw: string): string | undefined {
  let path = raw.replace(/[.,;:!?)]+$/, "");
  if (path.startsWith("./")) path = path.slice(2);
  if (path === "" || path.startsWith("/") || path.includes("://")) return undefined;
  const segments = path.split("/");
  if (segments.some((s) => !SEGMENT.test(s) || s === "." || s === "..")) return undefined;
  if (!FILE_NAME.test(segments[segments.length - 1]!)) return undefined;
  return path;
}

/** Files both lists name, sorted. */
export function sharedFiles(a: readonly string[] | undefined, b: readonly string[] | undefined): string[] {
  if (!a?.length || !b?.length) return [];
  const other = new Set(b);
  return [...new Set(a.filter((f) => other.has(f)))].sort();
}
