import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CLAUDE_WORK_TOOLS } from "../agents/claude.ts";
import type { CoderOptions } from "../core/coder-options.ts";
import type { TaskQuestion } from "../core/task.ts";
import { commitAll, forgetCommit } from "./4-publish.ts";
import {
  ASK_HUMAN_FILE_ENV,
  ASK_HUMAN_SERVER,
  askHumanServerScript,
  CLAUDE_ASK_HUMAN_TOOL,
} from "./ask-human/ask-human.ts";
import { gitIn } from "./workspace/git.ts";
import type { Worktree } from "./workspace/worktree.ts";

// The agent's `ask_human` tool, from the worker's side: offered to the coders that take MCP servers,
// the question read back after the agent, the run's session and unfinished change kept for the run
// that gets the answer, and the answer put in that run's prompt.

/** The coders whose adapters pass MCP servers to their CLI (coders.<coder>.options.mcp_servers). */
export const ASK_HUMAN_CODERS: ReadonlySet<string> = new Set(["claude", "codex"]);

/** In the agent's notes folder (writable in its sandbox, read by the worker after it). */
export const QUESTION_FILE = "QUESTION.jsonl";
/** In the task's artifacts: the waiting run's session, for the run that gets the answer to resume. */
const QUESTION_STATE_FILE = "question.json";
/** In the task's artifacts: what the waiting run had changed, applied again before the answer's run. */
const QUESTION_PATCH_FILE = "question.patch";

let serverSource: Promise<string> | undefined;

/**
 * The coder's options with Fleet's `ask_human` server added (as `mcp_servers.fleet`) and, for Claude,
 * its tool allowed. The server runs as the worker's node with `-e <source>` inside the sandbox, a child
 * of the CLI: Fleet's install, where its script is, is not shown to the agent (the caller shows node).
 */
export async function withAskHuman(
  coder: string,
  options: CoderOptions | undefined,
  questionFile: string,
): Promise<CoderOptions | undefined> {
  if (!ASK_HUMAN_CODERS.has(coder)) return options;
  serverSource ??= readFile(askHumanServerScript(), "utf8");
  const server = {
    command: process.execPath,
    args: ["--input-type=module", "-e", await serverSource],
    env: { [ASK_HUMAN_FILE_ENV]: questionFile },
  };
  const next: CoderOptions = {
    ...options,
    mcp_servers: { ...options?.mcp_servers, [ASK_HUMAN_SERVER]: server },
  };
  // Headless, a tool not allowed beforehand is refused: Claude's work tools (or the configured ones) and this one.
  if (coder === "claude")
    next.allowed_tools = [...(options?.allowed_tools ?? CLAUDE_WORK_TOOLS), CLAUDE_ASK_HUMAN_TOOL];
  return next;
}

/** What the run that asked keeps for the run that gets the answer. */
export interface SavedQuestion {
  sessionId?: string;
}

/**
 * Keeps what the asking run leaves for the answer's run: its session id and its change so far (as a
 * patch in the task's artifacts, never pushed: the agent is asked to change nothing more once it asks).
 */
export async function saveQuestionRun(
  artifactsDir: string,
  wt: Worktree,
  sessionId: string | undefined,
): Promise<void> {
  await writeFile(
    join(artifactsDir, QUESTION_STATE_FILE),
    JSON.stringify({ sessionId } satisfies SavedQuestion),
  );
  const patch = join(artifactsDir, QUESTION_PATCH_FILE);
  await commitAll(wt, "work in progress before a question");
  // Written by git itself: its output through the git helper loses the last newline a patch needs.
  await gitIn(wt, ["diff", "--binary", `--output=${patch}`, wt.startSha, "HEAD"]);
  await forgetCommit(wt, wt.startSha);
  const written = await readFile(patch, "utf8").catch(() => "");
  if (!written.trim()) await rm(patch, { force: true });
}

/** The session the asking run left, for the answer's run to resume (undefined when none was kept). */
export async function savedQuestionSession(artifactsDir: string): Promise<string | undefined> {
  try {
    const saved = JSON.parse(
      await readFile(join(artifactsDir, QUESTION_STATE_FILE), "utf8"),
    ) as SavedQuestion;
    return typeof saved.sessionId === "string" && saved.sessionId ? saved.sessionId : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Applies the asking run's change to the answer's worktree; true when there was one and it applied.
 * The patch is used once: a later run of the task starts from its branch as any run does.
 */
export async function restoreQuestionChange(
  artifactsDir: string,
  wt: Worktree,
): Promise<boolean | undefined> {
  const patch = join(artifactsDir, QUESTION_PATCH_FILE);
  const text = await readFile(patch, "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  const applied = await gitIn(wt, ["apply", "--binary", "--whitespace=nowarn", patch]).then(
    () => true,
    () => false,
  );
  await rm(patch, { force: true });
  return applied;
}

/**
 * What the answer's run is told: the question it asked, the person's answer, and where its earlier
 * change is. The answer is the words of someone with write access; it is quoted as theirs.
 */
export function answerPrompt(
  question: TaskQuestion,
  change: { restored: boolean | undefined },
): string | undefined {
  if (!question.answer) return undefined;
  const where =
    change.restored === true
      ? "The files you changed before asking are as you left them."
      : change.restored === false
        ? "The change you made before asking could not be applied again: this is a fresh checkout of the branch; make it again."
        : "";
  return [
    "## The answer to your question",
    "",
    "Earlier in this task you stopped to ask a person:",
    "",
    ...question.text.split("\n").map((l) => `> ${l}`),
    "",
    `@${question.answer.by} answered:`,
    "",
    ...question.answer.text.split("\n").map((l) => `> ${l}`),
    "",
    `Go on with the task with this answer. ${where}`.trim(),
  ].join("\n");
}
