// Fleet's `ask_human` MCP server: the agent asks a person one question, the line lands in the file
// named by FLEET_ASK_HUMAN_FILE, and the run ends waiting for the answer. MCP over stdio: one JSON-RPC
// 2.0 message a line. Plain node (20 and later), node: built-ins only: it runs inside the agent's
// sandbox as a child of the coder's CLI, with nothing of Fleet's installed dependencies.
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname, isAbsolute } from "node:path";
import { createInterface } from "node:readline";

/** Newest first: the first is answered to a client asking for a version this server does not know. */
const PROTOCOL_VERSIONS = ["2025-06-18", "2025-03-26", "2024-11-05"];
const MAX_QUESTION_CHARS = 4000;
const FILE_ENV = "FLEET_ASK_HUMAN_FILE";
const TOOL = "ask_human";

const POSTED =
  "Your question is posted for a person to answer. End your turn now and change nothing more: this run stops here, and the task resumes with the answer.";

const TOOL_SPEC = {
  name: TOOL,
  title: "Ask a person",
  description:
    "Ask the person who gave you this task one question, when you are blocked on a decision only a person can make: unclear or conflicting requirements, or a choice between options with real trade-offs that the task does not settle. Do not use it for anything you can find out yourself from the code, the docs or by running things, and never ask for a secret, a password or a token (the answer is public, on the issue): if you lack access, stop and say what access you need. Ask one clear, self-contained question (say what you found and what the options are). After calling it, end your turn at once and change nothing more: the run stops, and the task resumes later with the answer.",
  inputSchema: {
    type: "object",
    properties: {
      question: {
        type: "string",
        description: `The one question for the person, self-contained, at most ${MAX_QUESTION_CHARS} characters.`,
      },
    },
    required: ["question"],
    additionalProperties: false,
  },
  // True to what it does (appends one line to a local file, reaches nothing outside), and what lets
  // Codex run it under approval_policy "never": it refuses unannotated MCP tools there.
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
};

const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const reply = (id, result) => ({ jsonrpc: "2.0", id, result });
const failure = (id, code, message) => ({ jsonrpc: "2.0", id, error: { code, message } });
const toolText = (text, isError) => ({ content: [{ type: "text", text }], ...(isError ? { isError } : {}) });

/** What is wrong with a question, or undefined when it can be posted. */
function questionProblem(question) {
  if (typeof question !== "string")
    return `"question" must be a string (got ${question === undefined ? "nothing" : typeof question}): pass {"question": "<your question>"}.`;
  if (question.trim() === "") return '"question" is empty: write the one question a person should answer.';
  const length = [...question.trim()].length;
  if (length > MAX_QUESTION_CHARS)
    return `"question" has ${length} characters, more than ${MAX_QUESTION_CHARS}: shorten it to one clear question.`;
  return undefined;
}

function askHuman(args) {
  const question = args && typeof args === "object" ? args.question : undefined;
  const problem = questionProblem(question);
  if (problem) return toolText(problem, true);
  const file = process.env[FILE_ENV];
  if (!file || !isAbsolute(file))
    return toolText(
      `ask_human is not set up in this run (${FILE_ENV} is ${file ? "not an absolute path" : "not set"}), so no person will see the question: carry on without it, or stop and say in your final message what you need.`,
      true,
    );
  try {
    mkdirSync(dirname(file), { recursive: true });
    // One write of one line: the runner reads whole lines, the last one wins.
    appendFileSync(file, `${JSON.stringify({ question: question.trim(), at: new Date().toISOString() })}\n`, {
      mode: 0o600,
    });
  } catch (error) {
    return toolText(
      `the question could not be recorded (${error instanceof Error ? error.message : String(error)}): stop and say in your final message what you need.`,
      true,
    );
  }
  return toolText(POSTED, false);
}

/** The answer to one message, or undefined when it gets none (a notification, a client's response). */
function handle(message) {
  if (!message || typeof message !== "object" || Array.isArray(message)) return undefined;
  const hasId = typeof message.id === "string" || typeof message.id === "number";
  if (typeof message.method !== "string")
    return hasId && !("result" in message) && !("error" in message)
      ? failure(message.id, -32600, "not a request: it names no method")
      : undefined;
  if (!hasId) return undefined;
  const { id, method } = message;
  const params = message.params && typeof message.params === "object" ? message.params : {};
  switch (method) {
    case "initialize": {
      const asked = params.protocolVersion;
      return reply(id, {
        protocolVersion: PROTOCOL_VERSIONS.includes(asked) ? asked : PROTOCOL_VERSIONS[0],
        capabilities: { tools: {} },
        serverInfo: { name: "fleet", title: "Fleet", version: "1.0.0" },
      });
    }
    case "ping":
      return reply(id, {});
    case "tools/list":
      return reply(id, { tools: [TOOL_SPEC] });
    case "tools/call":
      if (params.name !== TOOL)
        return failure(
          id,
          -32602,
          `unknown tool ${JSON.stringify(params.name)}: this server has only ${TOOL}`,
        );
      return reply(id, askHuman(params.arguments));
    default:
      return failure(id, -32601, `method not found: ${method}`);
  }
}

function onLine(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return; // not JSON: nothing to answer, and no id to answer it with
  }
  try {
    // A batch (protocol 2025-03-26) is answered with a batch.
    if (Array.isArray(message)) {
      const answers = message.map(handle).filter((a) => a !== undefined);
      if (answers.length) send(answers);
      return;
    }
    const answer = handle(message);
    if (answer) send(answer);
  } catch (error) {
    process.stderr.write(`fleet ask_human: ${error instanceof Error ? error.message : String(error)}\n`);
  }
}

createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY }).on("line", (line) => {
  if (line.trim()) onLine(line);
});
// The client closing our stdout is the end of the session, not a crash.
process.stdout.on("error", () => process.exit(0));
