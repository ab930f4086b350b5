// The agent asks a person mid-run (its ask_human tool, Fleet's MCP server in the sandbox): the run ends
// `waiting`, `fleet task` shows the question, `fleet answer` queues the task again, and the next run
// resumes the agent's session with the answer and the change it had made before asking.
// Real CLI, real git, the real Claude CLI in bubblewrap against a scripted model.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterEach, expect, it } from "vitest";
import { readLocalComments } from "../../src/queue/local-github.ts";
import {
  cliEnv,
  fleet,
  SCRIPTED_USAGE,
  scriptedRunArgs,
  tempGitRepo,
  tempHome,
  USER_GIT_IDENTITY,
} from "./cli-helpers.ts";

const run = promisify(execFile);
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const turn = (over: Partial<ScriptTurn>): ScriptTurn => ({ usage: SCRIPTED_USAGE, ...over });
const QUESTION = "Which colour should the banner be, @mona: blue or red?";

it("ask_human: the run waits with the question, fleet answer queues it, the next run resumes with the answer and the earlier change", async () => {
  const repo = await tempGitRepo({
    ".github/fleet.yml": "plan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n",
  });
  const home = await tempHome();
  cleanups.push(repo.cleanup, home.cleanup);
  const env = cliEnv({
    FLEET_HOME: home.dir,
    ANTHROPIC_API_KEY: "sk-ant-local-test-credential-0000",
    ...USER_GIT_IDENTITY,
  });
  const cli = async (...args: string[]) => {
    const r = await fleet(args, { cwd: repo.dir, env });
    expect(r.exitCode, `${args.join(" ")}\n${r.stdout}\n${r.stderr}`).toBe(0);
    return r;
  };
  const json = async (...args: string[]) => JSON.parse((await cli(...args, "--json")).stdout);
  const model = await startAnthropicScriptServer({
    turns: [
      turn({
        toolUses: [{ name: "Bash", input: { command: "echo draft > BANNER.md", description: "start" } }],
      }),
      turn({ toolUses: [{ name: "mcp__fleet__ask_human", input: { question: QUESTION } }] }),
      turn({ text: "I asked which colour; stopping until someone answers." }),
      // The run with the answer.
      turn({
        toolUses: [{ name: "Bash", input: { command: "echo blue >> BANNER.md", description: "finish" } }],
      }),
      turn({ text: "The banner is blue." }),
    ],
  });
  cleanups.push(() => model.stop());

  const created = await json("bd", "create", "--title", "Add a banner", "--description", "Add BANNER.md.");
  await cli(...scriptedRunArgs(model.url));
  expect(model.played).toBe(3);

  // The agent's tool call reached Fleet's server in the sandbox, whose answer went back to the model.
  const afterAsk = model.requests.filter((r) => r.kind === "main")[2]!;
  expect(JSON.stringify(afterAsk.body)).toContain("Your question is posted for a person to answer");

  let task = (await json("bd", "show", created.id)).task;
  expect(task.state).toBe("waiting");
  expect(task.question).toEqual({ text: QUESTION, askedAt: expect.any(String) });
  const shown = (await cli("task", created.id)).stdout;
  expect(shown).toContain(`${created.id}  waiting`);
  expect(shown).toContain(QUESTION);
  expect(shown).toContain(`fleet answer ${created.id}`);
  // Waiting holds no slot and is not retried by hand.
  expect((await fleet(["retry", created.id], { cwd: repo.dir, env })).stderr).toContain("fleet answer");
  // The run's report says it waits, in local words; its token report counts the run.
  const comments = (await readLocalComments(home.dir, created.issue)).map((c) => c.body).join("\n");
  expect(comments).toContain("asked a question and waits for a person's answer");
  expect(comments).toContain(`fleet answer ${created.id}`);

  // An answer is refused for a task that is not waiting, and without text.
  expect((await fleet(["answer", created.id], { cwd: repo.dir, env })).exitCode).toBe(2);
  const answered = await json("answer", created.id, "Blue, please.");
  // Queued again, and dispatched in the same commit: a slot is free.
  expect(answered.state).toBe("dispatched");
  expect(answered.question.answer).toMatchObject({ text: "Blue, please." });
  const again = await fleet(["answer", created.id, "Red."], { cwd: repo.dir, env });
  expect(again.exitCode).toBe(1);
  expect(again.stderr).toContain("is dispatched; only a task whose agent asked a question (waiting)");

  await cli(...scriptedRunArgs(model.url));
  expect(model.played).toBe(5);
  // Resumed: the first request of the second run carries the first run's conversation and the answer.
  const resumed = JSON.stringify(model.requests.filter((r) => r.kind === "main")[3]!.body);
  expect(resumed).toContain("echo draft > BANNER.md");
  expect(resumed).toContain("Blue, please.");
  expect(resumed).toContain("The files you changed before asking are as you left them.");

  task = (await json("bd", "show", created.id)).task;
  expect(task.state).toBe("pr-open");
  expect(task.runs.map((r: { kind: string }) => r.kind)).toEqual(["work", "work"]);
  // The change before the question and the one after it are both on the branch.
  const { stdout } = await run("git", ["show", `${task.branch}:BANNER.md`], { cwd: repo.dir });
  expect(stdout).toBe("draft\nblue\n");
}, 240_000);
