import { type ConfigValue, parseConfigAssignments } from "./config.ts";
import { liveLines } from "./markdown-lines.ts";

export type FleetCommand =
  | { kind: "none" }
  | { kind: "status" }
  | { kind: "cancel"; reason?: string }
  | { kind: "retry"; coder?: string; model?: string }
  | { kind: "approve"; note?: string }
  /** A person's answer to the question a waiting task's agent asked (the rest of the comment). */
  | { kind: "answer"; text: string; taskId?: string }
  | { kind: "config-set"; assignments: Array<{ key: string; value: ConfigValue }> }
  | { kind: "help" }
  | { kind: "labels" }
  /** An agent review of the pull request (any PR, a person's too), by `coder` or the default coder. */
  | { kind: "review"; coder?: string; model?: string }
  /** Free text for a review-loop iteration; only valid on a pull request. */
  | { kind: "instructions"; text: string }
  | { kind: "error"; message: string };

export interface ParseCommandOptions {
  /** The comment is on a pull request (free-text instructions are allowed there only). */
  onPullRequest?: boolean;
}

export const FLEET_COMMAND_HELP = [
  "Fleet commands (a comment line starting with `/fleet`):",
  "- `/fleet status`: show the task's state, queue position and slot use",
  "- `/fleet cancel [reason]`: stop the task and its run",
  "- `/fleet retry [coder[:model]]`: queue a failed, cancelled or rate-limited task again (without waiting for the limit's reset), optionally with another coder or model",
  "- `/fleet approve [note]`: approve the posted plan",
  "- `/fleet answer [task-id] <answer>`: answer the question the task's agent asked (a plain reply on the issue answers too); the task is queued again with it",
  "- `/fleet config set key=value [key=value ...]`: change an operational setting (e.g. `max_concurrent=5`); who may drive Fleet, credentials, dispatch and the sandbox come only from `.github/fleet.yml`",
  "- `/fleet review [coder[:model]]` on a pull request: a read-only agent reviews its diff and posts one review with inline comments",
  "- `/fleet labels`: create the fleet labels in this repository",
  "- `/fleet help`: show this help",
  "- `/fleet <instructions>` on a Fleet pull request: another agent iteration with these instructions",
].join("\n");

const VERBS = [
  "status",
  "cancel",
  "retry",
  "approve",
  "answer",
  "config",
  "help",
  "labels",
  "review",
] as const;

/** The most of an answer the agent is given, in characters. */
export const MAX_ANSWER_CHARS = 10_000;
const CODER_SPEC = /^([a-z][a-z0-9_-]*)(?::([A-Za-z0-9][A-Za-z0-9._/-]{0,63}))?$/;

const error = (message: string): FleetCommand => ({
  kind: "error",
  message: `${message}\n\n${FLEET_COMMAND_HELP}`,
});

function parseLine(rest: string, fullText: string, options: ParseCommandOptions): FleetCommand {
  const trimmed = rest.trim();
  if (trimmed === "") {
    if (options.onPullRequest && fullText.trim()) return { kind: "instructions", text: fullText.trim() };
    return error("`/fleet` needs a command.");
  }
  const [word = "", ...args] = trimmed.split(/\s+/);
  const verb = word.toLowerCase();
  const argText = trimmed.slice(word.length).trim();
  switch (verb) {
    case "status":
    case "help":
    case "labels":
      if (args.length > 0) return error(`\`/fleet ${verb}\` takes no arguments (got "${argText}").`);
      return { kind: verb };
    case "cancel":
      return argText ? { kind: "cancel", reason: argText } : { kind: "cancel" };
    case "approve":
      return argText ? { kind: "approve", note: argText } : { kind: "approve" };
    case "answer": {
      // The answer is the rest of the comment: its first line's words and every line after.
      const rest = fullText
        .trim()
        .replace(/^answer\b\s*/i, "")
        .trim();
      // `/fleet answer fl-a3f <answer>` names the task when more than one of the issue waits (an A/B run).
      const named = /^(fl-[a-z0-9]+(?:\.[0-9]+)*)(?:\s+|$)/i.exec(rest);
      const text = named ? rest.slice(named[0].length).trim() : rest;
      if (!text)
        return error(
          "`/fleet answer` needs the answer (e.g. `/fleet answer Use the blue theme.`, or `/fleet answer fl-a3f Use the blue theme.` to name the task).",
        );
      return named ? { kind: "answer", text, taskId: named[1]!.toLowerCase() } : { kind: "answer", text };
    }
    case "retry": {
      if (args.length === 0) return { kind: "retry" };
      const spec = CODER_SPEC.exec(args[0]!);
      if (args.length > 1 || !spec) {
        return error(
          `\`/fleet retry\` takes an optional coder or coder:model (e.g. \`/fleet retry codex:o4-mini\`); got "${argText}".`,
        );
      }
      return spec[2]
        ? { kind: "retry", coder: spec[1]!, model: spec[2] }
        : { kind: "retry", coder: spec[1]! };
    }
    case "review": {
      if (!options.onPullRequest) return error("`/fleet review` works on a pull request only.");
      if (args.length === 0) return { kind: "review" };
      const spec = CODER_SPEC.exec(args[0]!);
      // More than a coder: review-loop instructions that start with the word (`/fleet review the names`).
      if (args.length > 1) return { kind: "instructions", text: fullText.trim() };
      if (!spec)
        return error(
          `\`/fleet review\` takes an optional coder or coder:model (e.g. \`/fleet review codex\`); got "${argText}".`,
        );
      return spec[2]
        ? { kind: "review", coder: spec[1]!, model: spec[2] }
        : { kind: "review", coder: spec[1]! };
    }
    case "config": {
      if (args[0]?.toLowerCase() !== "set") {
        return error("`/fleet config` needs `set key=value` (e.g. `/fleet config set max_concurrent=5`).");
      }
      const pairs = args.slice(1);
      if (pairs.length === 0) return error("`/fleet config set` needs at least one key=value.");
      // Settings change all or nothing, so every bad pair is reported at once.
      const parsed = parseConfigAssignments(pairs);
      if (!parsed.ok) {
        return {
          kind: "error",
          message: [
            "Fleet did not change the config (nothing is changed unless every setting is valid):",
            ...parsed.problems.map((p) => `- ${p}`),
          ].join("\n"),
        };
      }
      return { kind: "config-set", assignments: parsed.assignments };
    }
    default: {
      if (options.onPullRequest) return { kind: "instructions", text: fullText.trim() };
      const known = VERBS.map((v) => (v === "config" ? "config set" : v)).join(", ");
      return error(
        `Unknown command \`/fleet ${word}\`. Valid commands: ${known}. Free-text \`/fleet <instructions>\` works on Fleet pull requests only.`,
      );
    }
  }
}

/** An answer cut to MAX_ANSWER_CHARS, saying so. */
export const boundAnswer = (text: string): string =>
  text.length > MAX_ANSWER_CHARS
    ? `${[...text].slice(0, MAX_ANSWER_CHARS).join("")}\n[… cut: the answer was longer]`
    : text;

/**
 * Reads the first `/fleet` command in a comment. Only a line that starts with `/fleet` (leading spaces
 * allowed) counts; quoted lines and code blocks never do. On a pull request, `/fleet` followed by
 * anything that is not a command is a review-loop instruction, which takes the rest of the comment.
 */
export function parseFleetCommand(commentBody: string, options: ParseCommandOptions = {}): FleetCommand {
  const lines = liveLines(commentBody);
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s{0,3}\/fleet(?=$|\s)(.*)$/i.exec(lines[i]!.line);
    if (!m) continue;
    const rest = m[1] ?? "";
    // Instructions continue over the following lines of the comment.
    const following = commentBody
      .split(/\r?\n/)
      .slice(lines[i]!.index + 1)
      .join("\n");
    const fullText = following.trim() ? `${rest.trim()}\n${following}` : rest;
    return parseLine(rest, fullText, options);
  }
  return { kind: "none" };
}
