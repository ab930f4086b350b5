import { constants } from "node:fs";
import { mkdir, open, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import { neutraliseMentions } from "../../core/published-text.ts";

export const PLAN_FILE = "PLAN.md";
export const KNOWLEDGE_FILE = "KNOWLEDGE.md";
export const RESULT_FILE = "RESULT.json";
/** Where the agent's ask_human server writes its questions (see worker/question.ts). */
export const QUESTION_FILE = "QUESTION.jsonl";
export const LOG_FILE = "agent.log";
/** The run's network mode and the connections its egress proxy refused (JSON). */
export const NETWORK_FILE = "network.json";
/** What the setup steps printed. */
export const SETUP_LOG_FILE = "setup.log";

/** Where a task's artifacts and full log are kept for `fleet task <id> log|plan|knowledge|result`. */
export const taskArtifactsDir = (workDir: string, taskId: string): string =>
  join(workDir, "tasks", safeSegment(taskId));

/**
 * The agent's private HOME for a task, kept between its phases (the session resumes there). Outside the
 * artifacts folder: that one is uploaded from a runner, and a HOME is the agent's to fill (with
 * symlinks to the runner's files, say).
 */
export const agentHomeDir = (workDir: string, taskId: string): string =>
  join(workDir, "homes", safeSegment(taskId));

/** The agent's notes folder: next to the worktree, so nothing in it can land in the commit. */
export const agentNotesDir = (worktree: string, taskId: string): string =>
  join(dirname(worktree), `.fleet-task-${safeSegment(taskId)}`);

/** Task ids name folders; anything but a plain name would let a crafted id escape workDir. */
export function safeSegment(id: string): string {
  const s = id.replace(/[^A-Za-z0-9._-]/g, "_");
  if (s === "" || s === "." || s === "..")
    throw new Error(`"${id}" cannot be used as a task id: use letters, digits, ".", "_" or "-".`);
  return s;
}

/**
 * The agent's text, as Fleet may publish it: every mention and foreign or closing issue reference made
 * inert once, here where it is read, since all of it can go public (PR body, commit message, run
 * report, follow-up issues). `rawResult` keeps what the agent wrote.
 */
const agentText = z.string().transform((text) => neutraliseMentions(text, { untrusted: true }));

export const ResultSchema = z.object({
  status: z.enum(["done", "partial", "blocked", "failed"]),
  summary: agentText,
  testsRun: z.array(agentText).default([]),
  followUps: z.array(agentText).default([]),
});
export type TaskResult = z.infer<typeof ResultSchema>;

export interface AgentArtifacts {
  plan?: string;
  knowledge?: string;
  /** RESULT.json as the agent wrote it (parsed JSON), whether or not it is valid. */
  rawResult?: unknown;
  result?: TaskResult;
  /** Why RESULT.json could not be used; absent when it was valid. */
  resultProblem?: string;
}

/** The most of one notes file Fleet reads; the rest is left out with a note. */
export const MAX_NOTES_FILE_BYTES = 1024 * 1024;

/**
 * A file the agent wrote, read without following a symlink (an agent could link RESULT.json to a
 * file of the worker's, such as a private key, and have Fleet post it) and without reading more
 * than `maxBytes`. Undefined when it is missing; anything but a regular file is an error.
 */
export async function readAgentFile(
  path: string,
  maxBytes = MAX_NOTES_FILE_BYTES,
): Promise<string | undefined> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP")
      throw new Error(`${path} is a symbolic link; Fleet reads only plain files the agent wrote.`);
    throw error;
  }
  try {
    const info = await fh.stat();
    if (!info.isFile())
      throw new Error(`${path} is not a plain file; Fleet reads only plain files the agent wrote.`);
    const buf = Buffer.alloc(Math.min(info.size, maxBytes));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const text = buf.subarray(0, bytesRead).toString("utf8");
    return info.size > maxBytes ? `${text}\n\n[Fleet: ${info.size - maxBytes} more bytes left out]` : text;
  } finally {
    await fh.close();
  }
}

/** A fresh, empty notes folder for the agent (a crashed earlier run may have left one). */
export async function prepareNotesDir(dir: string, keep: string[] = []): Promise<void> {
  await mkdir(dir, { recursive: true });
  // A question an earlier run left must not end this one.
  for (const name of [PLAN_FILE, KNOWLEDGE_FILE, RESULT_FILE, QUESTION_FILE]) {
    if (!keep.includes(name)) await rm(join(dir, name), { force: true });
  }
}

/** Reads what the agent left; a missing or malformed RESULT.json is reported, never thrown. */
export async function readArtifacts(dir: string): Promise<AgentArtifacts> {
  const out: AgentArtifacts = {};
  const problems: string[] = [];
  // A notes file that is not a plain file (a symlink out of the folder) is left out and said so.
  const read = (name: string) =>
    readAgentFile(join(dir, name)).catch((error: Error) => {
      problems.push(`${name} was not read: ${error.message.replace(`${dir}/`, "")}`);
      return undefined;
    });
  const plan = await read(PLAN_FILE);
  if (plan !== undefined) out.plan = plan;
  const knowledge = await read(KNOWLEDGE_FILE);
  if (knowledge !== undefined) out.knowledge = knowledge;
  const raw = await read(RESULT_FILE);
  if (raw === undefined) {
    out.resultProblem = [
      ...problems,
      `The agent wrote no ${RESULT_FILE}, so there is no summary from it.`,
    ].join(" ");
    return out;
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    out.rawResult = raw;
    out.resultProblem = `The agent's ${RESULT_FILE} is not valid JSON (${(error as Error).message}).`;
    return out;
  }
  out.rawResult = json;
  const parsed = ResultSchema.safeParse(json);
  if (parsed.success) out.result = parsed.data;
  else
    out.resultProblem = `The agent's ${RESULT_FILE} does not have the expected shape: ${parsed.error.issues
      .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
      .join("; ")}.`;
  return out;
}

/** Copies the notes into the task's artifacts folder so they outlive the worktree (plain files only). */
export async function keepArtifacts(notesDir: string, artifactsDir: string): Promise<void> {
  await mkdir(artifactsDir, { recursive: true });
  for (const name of [PLAN_FILE, KNOWLEDGE_FILE, RESULT_FILE]) {
    const text = await readAgentFile(join(notesDir, name)).catch(() => undefined);
    if (text !== undefined) await writeFile(join(artifactsDir, name), text);
  }
}
