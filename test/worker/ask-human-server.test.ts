// Fleet's ask_human MCP server, spoken to over stdio as a coder CLI does (one JSON-RPC message a
// line), and readQuestions over the files it (or an agent) leaves.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  ASK_HUMAN_FILE_ENV,
  ASK_HUMAN_SERVER,
  askHumanServer,
  askHumanServerScript,
  CLAUDE_ASK_HUMAN_TOOL,
  MAX_QUESTION_CHARS,
  readQuestions,
} from "../../src/worker/ask-human/ask-human.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const POSTED =
  "Your question is posted for a person to answer. End your turn now and change nothing more: this run stops here, and the task resumes with the answer.";

// biome-ignore lint/suspicious/noExplicitAny: JSON-RPC messages are arbitrary JSON
type Message = any;

/** The server as a coder CLI runs it: a child on stdio, its answers read a line at a time. */
class McpClient {
  readonly received: Message[] = [];
  readonly stderr: string[] = [];
  private readonly child: ChildProcessWithoutNullStreams;
  private buffered = "";
  private waiters: Array<() => void> = [];

  constructor(env: Record<string, string>) {
    const server = askHumanServer("/unused");
    this.child = spawn(server.command, server.args, { env: { PATH: process.env.PATH ?? "", ...env } });
    this.child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      this.buffered += chunk;
      let newline = this.buffered.indexOf("\n");
      while (newline >= 0) {
        this.received.push(JSON.parse(this.buffered.slice(0, newline)));
        this.buffered = this.buffered.slice(newline + 1);
        newline = this.buffered.indexOf("\n");
      }
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.child.stderr.setEncoding("utf8").on("data", (chunk: string) => this.stderr.push(chunk));
  }

  write(line: string): void {
    this.child.stdin.write(`${line}\n`);
  }

  /** Sends a request and waits for the answer with its id. */
  async request(id: number, method: string, params?: unknown): Promise<Message> {
    this.write(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }));
    for (;;) {
      const answer = this.received.find((m) => m.id === id);
      if (answer) return answer;
      if (this.child.exitCode !== null) throw new Error(`server exited: ${this.stderr.join("")}`);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  ask(id: number, args: unknown): Promise<Message> {
    return this.request(id, "tools/call", { name: "ask_human", arguments: args });
  }

  /** Closes stdin; resolves with the exit code. */
  close(): Promise<number | null> {
    if (this.child.exitCode !== null) return Promise.resolve(this.child.exitCode);
    return new Promise((resolve) => {
      this.child.once("exit", (code) => resolve(code));
      this.child.stdin.end();
    });
  }
}

let clients: McpClient[] = [];
afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
});

function start(questionFile?: string): McpClient {
  const client = new McpClient(questionFile ? { [ASK_HUMAN_FILE_ENV]: questionFile } : {});
  clients.push(client);
  return client;
}

const fresh = () => scratchDir("fleet-ask-human-");
const lines = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));

describe("the ask_human MCP server", () => {
  it("is the `fleet` server run by node from Fleet's install, its file in the environment", () => {
    expect(ASK_HUMAN_SERVER).toBe("fleet");
    expect(CLAUDE_ASK_HUMAN_TOOL).toBe("mcp__fleet__ask_human");
    const server = askHumanServer("/work/q.jsonl", "/opt/node/bin/node");
    expect(server).toEqual({
      command: "/opt/node/bin/node",
      args: [askHumanServerScript()],
      env: { FLEET_ASK_HUMAN_FILE: "/work/q.jsonl" },
    });
    expect(existsSync(askHumanServerScript())).toBe(true);
    expect(askHumanServer("/q").command).toBe(process.execPath);
    expect(() => askHumanServer("q.jsonl")).toThrow(/absolute path/);
  });

  it("initializes with the client's protocol version when it knows it, else its latest", async () => {
    const client = start(join(fresh(), "q.jsonl"));
    const known = await client.request(1, "initialize", {
      protocolVersion: "2025-03-26",
      capabilities: {},
      clientInfo: { name: "test", version: "1" },
    });
    expect(known).toEqual({
      jsonrpc: "2.0",
      id: 1,
      result: {
        protocolVersion: "2025-03-26",
        capabilities: { tools: {} },
        serverInfo: expect.objectContaining({ name: "fleet" }),
      },
    });
    const unknown = await client.request(2, "initialize", { protocolVersion: "1999-01-01" });
    expect(unknown.result.protocolVersion).toBe("2025-06-18");
    client.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
    expect(await client.request(3, "ping")).toEqual({ jsonrpc: "2.0", id: 3, result: {} });
    // The notification got no answer of its own: only the three requests were answered.
    expect(client.received.map((m) => m.id)).toEqual([1, 2, 3]);
  });

  it("lists one tool, ask_human, that takes a required question and says when to use it", async () => {
    const client = start(join(fresh(), "q.jsonl"));
    const { result } = await client.request(1, "tools/list", {});
    expect(result.tools).toHaveLength(1);
    const [tool] = result.tools;
    expect(tool.name).toBe("ask_human");
    expect(tool.inputSchema).toMatchObject({
      type: "object",
      properties: { question: { type: "string" } },
      required: ["question"],
    });
    expect(tool.description).toMatch(/only a person can make/);
    expect(tool.description).toMatch(/one clear/);
    expect(tool.description).toMatch(/end your turn/i);
    // Codex runs an MCP tool under approval_policy "never" only when it says it destroys nothing and
    // reaches nothing outside (or reads only).
    expect(tool.annotations).toMatchObject({ destructiveHint: false, openWorldHint: false });
  });

  it("posts a question: one JSON line appended to the file (made with its folder), and tells the agent to stop", async () => {
    const file = join(fresh(), "run", "questions.jsonl");
    const client = start(file);
    const first = await client.ask(1, { question: "  Should the API keep v1 routes?\n" });
    expect(first.result).toEqual({ content: [{ type: "text", text: POSTED }] });
    expect(first.result.isError).toBeUndefined();
    const second = await client.ask(2, { question: "Which region?" });
    expect(second.result.content[0].text).toBe(POSTED);
    const written = lines(file);
    expect(written.map((l) => l.question)).toEqual(["Should the API keep v1 routes?", "Which region?"]);
    for (const l of written) {
      expect(Object.keys(l).sort()).toEqual(["at", "question"]);
      expect(new Date(l.at).toISOString()).toBe(l.at);
    }
    expect(await readQuestions(file)).toBe("Which region?");
  });

  it("refuses an empty, oversized or non-string question with a tool error, writing nothing", async () => {
    const file = join(fresh(), "q.jsonl");
    const client = start(file);
    const cases: Array<[unknown, RegExp]> = [
      [{ question: "" }, /empty/],
      [{ question: "   \n\t" }, /empty/],
      [{ question: "x".repeat(MAX_QUESTION_CHARS + 1) }, /4001 characters, more than 4000/],
      [{ question: 42 }, /must be a string \(got number\)/],
      [{ question: ["a"] }, /must be a string/],
      [{}, /must be a string \(got nothing\)/],
      [undefined, /must be a string \(got nothing\)/],
    ];
    let id = 0;
    for (const [args, message] of cases) {
      const { result } = await client.ask(++id, args);
      expect(result.isError).toBe(true);
      expect(result.content[0].text).toMatch(message);
    }
    expect(existsSync(file)).toBe(false);
    // At the limit exactly it is taken.
    const { result } = await client.ask(++id, { question: "y".repeat(MAX_QUESTION_CHARS) });
    expect(result.isError).toBeUndefined();
    expect(lines(file)).toHaveLength(1);
  });

  it("answers a tool error when FLEET_ASK_HUMAN_FILE is not set, and an unknown tool a JSON-RPC error", async () => {
    const client = start();
    const { result } = await client.ask(1, { question: "Which region?" });
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toMatch(/FLEET_ASK_HUMAN_FILE is not set/);
    const other = await client.request(2, "tools/call", { name: "rm_rf", arguments: {} });
    expect(other.error.code).toBe(-32602);
    expect(other.error.message).toMatch(/unknown tool "rm_rf"/);
  });

  it("answers an unknown method -32601, ignores garbage lines and keeps answering", async () => {
    const file = join(fresh(), "q.jsonl");
    const client = start(file);
    const unknown = await client.request(1, "resources/list", {});
    expect(unknown).toEqual({
      jsonrpc: "2.0",
      id: 1,
      error: { code: -32601, message: expect.stringContaining("resources/list") },
    });
    client.write("this is not json");
    client.write('{"jsonrpc":"2.0","id":');
    client.write("null");
    client.write('"a string"');
    client.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/whatever" }));
    client.write(JSON.stringify({ jsonrpc: "2.0", id: 99, result: {} }));
    const ask = await client.ask(2, { question: "Still there?" });
    expect(ask.result.content[0].text).toBe(POSTED);
    expect(client.received.map((m) => m.id)).toEqual([1, 2]);
    expect(await readQuestions(file)).toBe("Still there?");
    expect(await client.close()).toBe(0);
  });
});

describe("readQuestions", () => {
  it("is undefined for a missing, empty or question-less file", async () => {
    const dir = fresh();
    expect(await readQuestions(join(dir, "missing.jsonl"))).toBeUndefined();
    expect(await readQuestions(join(dir, "no-such-folder", "q.jsonl"))).toBeUndefined();
    writeFileSync(join(dir, "empty.jsonl"), "");
    expect(await readQuestions(join(dir, "empty.jsonl"))).toBeUndefined();
    writeFileSync(
      join(dir, "junk.jsonl"),
      'not json\n{"question": ""}\n{"question": "   "}\n{"question": 7}\n["question"]\nnull\n{"q": "x"}\n\u0000\n',
    );
    expect(await readQuestions(join(dir, "junk.jsonl"))).toBeUndefined();
  });

  it("gives the last valid question, trimmed and bounded, skipping malformed lines", async () => {
    const dir = fresh();
    const file = join(dir, "q.jsonl");
    writeFileSync(
      file,
      [
        JSON.stringify({ question: "First?", at: "2025-01-01T00:00:00.000Z" }),
        JSON.stringify({ question: "  Second?\n", at: "2025-01-01T00:00:01.000Z" }),
        "{broken",
        JSON.stringify({ question: 3 }),
        "",
      ].join("\n"),
    );
    expect(await readQuestions(file)).toBe("Second?");
    // Written by hand, beyond the server's bound: cut to the bound (whole characters).
    const long = `${"é".repeat(MAX_QUESTION_CHARS - 1)}😀😀`;
    writeFileSync(file, `${JSON.stringify({ question: long })}\r\n`);
    const read = await readQuestions(file);
    expect([...(read ?? "")]).toHaveLength(MAX_QUESTION_CHARS);
    expect(read?.endsWith("é😀")).toBe(true);
  });

  it("reads only a plain file: a symlink or a folder is none", async () => {
    const dir = fresh();
    const target = join(dir, "elsewhere.jsonl");
    writeFileSync(target, `${JSON.stringify({ question: "Planted?" })}\n`);
    symlinkSync(target, join(dir, "link.jsonl"));
    expect(await readQuestions(join(dir, "link.jsonl"))).toBeUndefined();
    mkdirSync(join(dir, "folder.jsonl"));
    expect(await readQuestions(join(dir, "folder.jsonl"))).toBeUndefined();
  });

  it("reads the end of a huge file, from its first whole line", async () => {
    const file = join(fresh(), "q.jsonl");
    const filler = `${JSON.stringify({ question: "Old?" })}\n`.repeat(40_000);
    writeFileSync(file, `${filler}${JSON.stringify({ question: "x".repeat(300_000) })}\n`);
    expect(await readQuestions(file)).toBe("x".repeat(MAX_QUESTION_CHARS));
    writeFileSync(file, `${filler}${"z".repeat(2 * 1024 * 1024)}\n`);
    expect(await readQuestions(file)).toBeUndefined();
  });
});
