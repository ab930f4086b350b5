import { parseFleetLabel } from "./labels.ts";
import { liveLines } from "./markdown-lines.ts";

/**
 * `@fleet please add a changelog entry`: a comment that mentions the app's handle (its slug) asks for
 * a task, or on a Fleet pull request for a review round. `@fleet fleet:codex:gpt-5 ...` names the coder
 * and model as a label does; without it the repository's default coder does the work. Mentions in
 * quotes, code blocks and code spans do not count, nor one inside a word or an e-mail address.
 */
export type Mention =
  | { kind: "none" }
  | { kind: "request"; text: string; coder?: string; model?: string }
  | { kind: "error"; message: string };

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** Inline code spans, blanked to spaces of the same length so positions stay. */
const withoutCodeSpans = (line: string) => line.replace(/(`+)[^`]*?\1/g, (m) => " ".repeat(m.length));

export function parseMention(body: string, handle: string, knownCoders: readonly string[]): Mention {
  if (!handle) return { kind: "none" };
  const at = new RegExp(`(^|[^\\w@/.-])@${escapeRegExp(handle)}(?![\\w-])`, "i");
  const lines = body.split(/\r?\n/);
  for (const { line, index } of liveLines(body)) {
    const m = at.exec(withoutCodeSpans(line));
    if (!m) continue;
    const start = m.index + m[1]!.length;
    const after = [line.slice(start + handle.length + 1), ...lines.slice(index + 1)]
      .join("\n")
      .replace(/^[\s,:;!-]+/, "")
      .trim();
    const before = line.slice(0, start).trim();
    return request(after || before, handle, knownCoders);
  }
  return { kind: "none" };
}

function request(text: string, handle: string, knownCoders: readonly string[]): Mention {
  const prefix = /^(fleet:\S+)\s*/i.exec(text);
  const rest = prefix ? text.slice(prefix[0].length).trim() : text;
  const example = `e.g. \`@${handle} add a changelog entry\` or \`@${handle} fleet:${knownCoders[0] ?? "claude"} add a changelog entry\``;
  if (!rest) return { kind: "error", message: `Say what to do after @${handle}, ${example}.` };
  if (!prefix) return { kind: "request", text: rest };
  const label = parseFleetLabel(prefix[1]!, knownCoders);
  if (label.kind === "error") return { kind: "error", message: label.message };
  if (label.kind !== "coder")
    return {
      kind: "error",
      message: `\`${prefix[1]}\` names no coder: use \`fleet:<coder>[:<model>]\` (${knownCoders.join(", ")}), ${example}.`,
    };
  return { kind: "request", text: rest, coder: label.coder, ...(label.model ? { model: label.model } : {}) };
}
