// plan_approval in local mode, figures first: the plan is one run and the approved work another, each
// counted once, and the task's totals, the token report's every-run table, `fleet tasks --json` and
// the day's ledger agree. Real CLI, a real git repository, the real Claude CLI against a scripted model.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
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

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const turn = (over: Partial<ScriptTurn>): ScriptTurn => ({ usage: SCRIPTED_USAGE, ...over });

it("plan, fleet approve, work: two runs (plan, work), and the totals, the runs table, fleet tasks and the ledger agree", async () => {
  const repo = await tempGitRepo({
    ".github/fleet.yml":
      "plan_phase: true\nplan_approval: true\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n",
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
    expect(r.exitCode, `${args.join(" ")}\n${r.stderr}`).toBe(0);
    return r;
  };
  const json = async (...args: string[]) => JSON.parse((await cli(...args, "--json")).stdout);
  const model = await startAnthropicScriptServer({
    turns: [
      turn({ text: "1. Write PLANNED.md with one line." }),
      turn({
        toolUses: [{ name: "Bash", input: { command: 'echo "planned" > PLANNED.md', description: "edit" } }],
      }),
      turn({ text: "Wrote PLANNED.md." }),
    ],
  });
  cleanups.push(() => model.stop());

  const created = await json(
    "bd",
    "create",
    "--title",
    "Add PLANNED.md",
    "--description",
    "Write PLANNED.md.",
  );
  await cli(...scriptedRunArgs(model.url));
  expect((await json("bd", "show", created.id)).task.state).toBe("awaiting-approval");
  await json("approve", created.id);
  await cli(...scriptedRunArgs(model.url));
  expect(model.played).toBe(3);

  const task = (await json("bd", "show", created.id)).task;
  expect(task.state).toBe("pr-open");
  // One turn planned, two worked: 900 input tokens a turn.
  expect(
    task.runs.map((r: { kind: string; totals: { usage: { input: number } } }) => [
      r.kind,
      r.totals.usage.input,
    ]),
  ).toEqual([
    ["plan", 900],
    ["work", 1_800],
  ]);
  expect(task.totals.usage.input).toBe(2_700);

  const rows = await json("tasks", "--all");
  expect(rows.find((r: { id: string }) => r.id === created.id).tokens.input).toBe(2_700);

  const comments = await readLocalComments(home.dir, created.issue);
  const report = comments.map((c) => c.body).find((b) => b.includes("fleet:token-report"))!;
  expect(report).toContain("| 1. plan | 900 |");
  expect(report).toContain("| 2. work (this run) | 1,800 |");
  expect(report).toContain("| **Total (2 runs)** | **2,700** |");
  expect(report).toContain("The agent's own report agrees with the gateway's figures");

  // The ledger budgets are held against: the day's line is the two runs, once each.
  const state = JSON.parse(await readFile(join(home.dir, "state", ".fleet", "state.json"), "utf8"));
  const days = Object.values(state.ledger) as Array<
    Record<string, { runs: number; usage: { input: number } }>
  >;
  expect(days.map((d) => [d.claude?.runs, d.claude?.usage.input])).toEqual([[2, 2_700]]);
}, 180_000);
