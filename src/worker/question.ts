import { readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CLAUDE_WORK_TOOLS } from "../agents/claude.ts";
import type { CoderOptions } from "../core/coder-options.ts";
import { blockQuote, neutraliseMentions, plainAgentText } from "../core/published-text.ts";
import type { Task, TaskQuestion } from "../core/task.ts";
import { type GitHub, parseRepoFullName } from "../github/port.ts";
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
export { QUESTION_FILE } from "./workspace/artifacts.ts";

/** In the task's artifacts: the waiting run's session, for the run that gets the answer to resume. */
const QUESTION_STATE_FILE = "question.json";
/** In the task's artifacts: what the waiting run had changed, applied again before the answer's run. */
const QUESTION_PATCH_FILE = "question.patch";
/** The largest change kept for the answer's run (a change is source, not build output). */
const MAX_QUESTION_PATCH_BYTES = 64 * 1024 * 1024;

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
  serverSource ??= readFile(askHumanServerScript(), "utf8").catch((error) => {
    serverSource = undefined;
    throw error;
  });
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
  const size = await stat(patch).then(
    (st) => st.size,
    () => 0,
  );
  // Nothing changed, or more than a patch should carry: the answer's run is told the change is not here.
  if (size === 0 || size > MAX_QUESTION_PATCH_BYTES) await rm(patch, { force: true });
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
  if (
    !(await stat(patch).then(
      (st) => st.isFile(),
      () => false,
    ))
  )
    return undefined;
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
  change: { restored: boolean | undefined; resumed: boolean },
): string | undefined {
  if (!question.answer) return undefined;
  const where =
    change.restored === true
      ? "The files you changed before asking are as you left them."
      : change.restored === false
        ? "The change you made before asking could not be applied again: this is a fresh checkout of the branch; make it again."
        : change.resumed
          ? ""
          : "This run starts from the branch as it was last pushed: anything changed before the question was asked is not here.";
  return [
    "## The answer to your question",
    "",
    "Earlier in this task you stopped to ask a person:",
    "",
    blockQuote(question.text),
    "",
    `@${question.answer.by} answered:`,
    "",
    blockQuote(question.answer.text),
    "",
    `Go on with the task with this answer. ${where}`.trim(),
  ].join("\n");
}

/**
 * A comment that notifies the person who asked for the task (an edit of the tracking comment notifies
 * no one), posted once the task is recorded `waiting`, so a reply that comes at once finds it waiting.
 * The agent's words are quoted, plain, with their mentions made inert. A refusal leaves the question
 * on the tracking comment.
 */
export async function postQuestion(
  github: GitHub,
  task: Pick<Task, "id" | "repo" | "issue" | "requestedBy">,
  question: string,
  expireAfterHours: number,
): Promise<void> {
  const who = task.requestedBy ? `@${task.requestedBy}, the` : "The";
  const quoted = blockQuote(neutraliseMentions(plainAgentText(question), { untrusted: true }));
  const body = [
    `${who} agent working on this issue (Fleet task \`${task.id}\`) has a question:`,
    "",
    quoted,
    "",
    `Someone with write access answers by replying here, or with \`/fleet answer <answer>\`; the task is queued again with the answer. The answer is public and is given to the agent: never paste a secret. Unanswered, the task fails after ${expireAfterHours} h.`,
  ].join("\n");
  try {
    await github.issues.createComment(parseRepoFullName(task.repo), task.issue, body);
  } catch {}
}
