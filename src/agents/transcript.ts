import type { AgentAdapter, AgentEvent } from "./types.ts";

/**
 * An agent's run as a person reads it: what it said, each tool it called with its main argument, what
 * the tool answered cut to a line or two, errors, rate limits and how the run ended. The same for every
 * coder (their lines are parsed into AgentEvents first); `fleet task <id> log` prints it and the
 * tracking comment's log excerpt is its tail. Lines the coder printed that were not its JSON (its own
 * warnings on stderr) are kept as they are; JSON of kinds Fleet does not read is counted, not shown.
 */

export interface TranscriptOptions {
  /** Lines of the agent's text kept per message (default 12). */
  textLines?: number;
  /** Lines of a tool's result kept (default 2). */
  resultLines?: number;
  /** Characters per line (default 200). */
  width?: number;
  /** Leave out the line counting the coder's bookkeeping (a log followed piece by piece). */
  quiet?: boolean;
}

const cut = (line: string, width: number) => (line.length > width ? `${line.slice(0, width - 1)}…` : line);

/** At most `max` non-blank lines of `text`, each cut to `width`, and a count of what was left out. */
function firstLines(text: string, max: number, width: number): string[] {
  const lines = text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== "");
  const kept = lines.slice(0, max).map((l) => cut(l, width));
  if (lines.length > max)
    kept.push(`… ${lines.length - max} more line${lines.length - max === 1 ? "" : "s"}`);
  return kept;
}

/** The argument that says what a tool call does: its command, file, pattern, address or subject. */
export function toolCallSummary(input: unknown): string {
  if (typeof input === "string") return input;
  if (!input || typeof input !== "object") return "";
  const o = input as Record<string, unknown>;
  for (const key of [
    "command",
    "file_path",
    "filePath",
    "pattern",
    "path",
    "url",
    "query",
    "subject",
    "plan",
  ]) {
    const v = o[key];
    if (typeof v === "string" && v.trim()) return v.split("\n")[0]!;
    if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v.join(" ");
  }
  if (typeof o.taskId === "string" && typeof o.status === "string") return `#${o.taskId} ${o.status}`;
  const list = o.todos ?? o.items;
  if (Array.isArray(list)) return `${list.length} item${list.length === 1 ? "" : "s"}`;
  const json = JSON.stringify(input);
  return json === "{}" ? "" : json;
}

const num = (n: number) => n.toLocaleString("en-US");

function endLine(e: Extract<AgentEvent, { type: "result" }>): string {
  const t = e.totals;
  const parts = [
    e.ok ? "finished" : "ended with an error",
    `${t.turns} turn${t.turns === 1 ? "" : "s"}`,
    `${num(t.usage.input + t.usage.cacheRead + t.usage.cacheWrite)} tokens in, ${num(t.usage.output)} out`,
  ];
  if (t.costUsd !== null) parts.push(`$${t.costUsd.toFixed(2)}`);
  return `== ${parts.join(" · ")}`;
}

/** The readable transcript of a run's events, one line per step (indented lines belong to the one above). */
export function renderTranscript(events: readonly AgentEvent[], opts: TranscriptOptions = {}): string {
  const width = opts.width ?? 200;
  const out: string[] = [];
  let skipped = 0;
  let lastText = "";
  for (const e of events) {
    switch (e.type) {
      case "init":
        out.push(
          `== ${[e.model, e.sessionId && `session ${e.sessionId}`].filter(Boolean).join(" · ") || "started"}`,
        );
        break;
      case "text": {
        lastText = e.text.trim();
        const lines = firstLines(e.text, opts.textLines ?? 12, width - 2);
        if (lines.length) out.push(`> ${lines[0]}`, ...lines.slice(1).map((l) => `  ${l}`));
        break;
      }
      case "tool_use":
        out.push(cut(`-> ${e.name} ${toolCallSummary(e.input)}`.trimEnd(), width));
        break;
      case "tool_result": {
        const lines = firstLines(e.output, opts.resultLines ?? 2, width - 6);
        const mark = e.isError ? "   ! " : "   = ";
        out.push(
          ...(lines.length ? lines : ["(no output)"]).map((l, i) => `${i === 0 ? mark : "     "}${l}`),
        );
        break;
      }
      case "rate_limit":
        out.push(cut(`!! rate limited: ${e.message}${e.resetsAt ? ` (until ${e.resetsAt})` : ""}`, width));
        break;
      case "error":
        out.push(cut(`!! ${e.message}`, width));
        break;
      case "result":
        out.push(endLine(e));
        // The summary is most often the last message again.
        if (e.summary && e.summary.trim() !== lastText)
          out.push(...firstLines(e.summary, opts.textLines ?? 12, width - 2).map((l) => `  ${l}`));
        break;
      case "usage":
        break;
      case "unknown":
        // JSON of a kind not read here is the coder's bookkeeping; anything else it printed is kept.
        if (/^\s*[{[]/.test(e.raw)) skipped++;
        else if (e.raw.trim()) out.push(cut(e.raw.trimEnd(), width));
        break;
    }
  }
  if (skipped)
    out.push(
      `(${skipped} line${skipped === 1 ? "" : "s"} of the coder's own bookkeeping not shown; --raw shows every line)`,
    );
  return out.join("\n");
}

/** A run's log (the coder's output lines, as the worker saved them) read with its coder's parser. */
export function eventsOfLog(adapter: Pick<AgentAdapter, "parseLine">, log: string): AgentEvent[] {
  return log.split("\n").flatMap((line) => adapter.parseLine(line));
}

/** The transcript of a saved log; a log of no readable line is given back as it is. */
export function transcriptOfLog(
  adapter: Pick<AgentAdapter, "parseLine">,
  log: string,
  opts?: TranscriptOptions,
): string {
  const text = renderTranscript(eventsOfLog(adapter, log), opts);
  return text.trim() ? text : log;
}
