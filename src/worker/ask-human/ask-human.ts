import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { fleetInstallRoot } from "../sandbox/install-root.ts";

/** The MCP server's name in the coders' settings: its tool is `ask_human` of server `fleet`. */
export const ASK_HUMAN_SERVER = "fleet";
/** The tool as Claude Code names it (`mcp__<server>__<tool>`), for `--allowedTools`. */
export const CLAUDE_ASK_HUMAN_TOOL = `mcp__${ASK_HUMAN_SERVER}__ask_human`;
/** The variable that names the file the server appends each question to (one JSON line each). */
export const ASK_HUMAN_FILE_ENV = "FLEET_ASK_HUMAN_FILE";
/** The longest question the server takes, and the most `readQuestions` returns, in characters. */
export const MAX_QUESTION_CHARS = 4000;

/** The most of the file read (its end): a question line is well under this; the agent can write the file. */
const MAX_READ_BYTES = 1024 * 1024;

/**
 * The server's script, from Fleet's install (not this module's URL: in build/fleet.mjs or the Action's
 * bundle that names the bundle, and the script is not bundled). A file inside the install root, which
 * no sandbox is shown whole: a sandboxed run mounts this one file.
 */
export function askHumanServerScript(): string {
  return join(fleetInstallRoot(), "src", "worker", "ask-human", "server.mjs");
}

/**
 * The `ask_human` server as a local MCP server of the coders' options (`mcp_servers.fleet`): `node`
 * runs the script (plain node, no dependency), which appends each question to `questionFile`.
 */
export function askHumanServer(
  questionFile: string,
  node: string = process.execPath,
): { command: string; args: string[]; env: Record<string, string> } {
  if (!isAbsolute(questionFile))
    throw new Error(
      `ask_human's question file must be an absolute path (got ${JSON.stringify(questionFile)}): the server runs in the agent's working folder.`,
    );
  return { command: node, args: [askHumanServerScript()], env: { [ASK_HUMAN_FILE_ENV]: questionFile } };
}

/**
 * The last question the agent posted in `file` (trimmed, at most MAX_QUESTION_CHARS), or undefined when
 * there is none: no file, an empty one, no valid line. The agent can write the file itself, so its
 * content is untrusted: lines that are not `{"question": "<text>"}` are skipped, a symlink or anything
 * but a plain file counts as none, and only the file's last megabyte is read.
 */
export async function readQuestions(file: string): Promise<string | undefined> {
  const text = await readTail(file);
  if (text === undefined) return undefined;
  const lines = text.split("\n");
  for (let i = lines.length - 1; i >= 0; i--) {
    const question = questionOf(lines[i]!);
    if (question !== undefined) return question;
  }
  return undefined;
}

function questionOf(line: string): string | undefined {
  if (!line.trim()) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return undefined;
  const question = (parsed as { question?: unknown }).question;
  if (typeof question !== "string" || !question.trim()) return undefined;
  return [...question.trim()].slice(0, MAX_QUESTION_CHARS).join("").trim();
}

/** The file's last MAX_READ_BYTES as text, from its first whole line; undefined when it is no plain file. */
async function readTail(file: string): Promise<string | undefined> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    // No following a link the agent left, and no blocking on a FIFO.
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (isNotAFile(error)) return undefined;
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return undefined;
    const length = Math.min(info.size, MAX_READ_BYTES);
    const start = info.size - length;
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, start);
    const text = buffer.subarray(0, bytesRead).toString("utf8");
    if (start === 0) return text;
    // Started mid-file: the first line is partial.
    const newline = text.indexOf("\n");
    return newline < 0 ? "" : text.slice(newline + 1);
  } finally {
    await handle.close();
  }
}

const isNotAFile = (error: unknown): boolean =>
  ["ENOENT", "ENOTDIR", "ELOOP", "EISDIR", "ENXIO"].includes((error as NodeJS.ErrnoException).code ?? "");
