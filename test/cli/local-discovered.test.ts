import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterEach, describe, expect, it } from "vitest";
import { parseJsonl } from "../../src/beads/parse.ts";
import { localIssuesOf } from "../../src/queue/local-issues.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { cliEnv, fleet, SCRIPTED_USAGE, scriptedRunArgs, tempGitRepo, tempHome } from "./cli-helpers.ts";

// Discovered work in local mode: the follow-ups an agent lists in RESULT.json are filed as local issues
// (the GitHub port's issues.create), linked discovered-from in beads, and queued in the same repository
// with auto_label_discovered. The real CLI, the real Claude CLI, a scripted model.

const FLEET_YML = "plan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";

/** One run: a file in the repository and a RESULT.json with these follow-ups in the notes folder. */
const runTurns = (file: string, followUps: string[]) => {
  const result = JSON.stringify({ status: "done", summary: `Added ${file}.`, testsRun: [], followUps });
  return [
    {
      toolUses: [
        {
          name: "Bash",
          input: {
            // The notes folder sits next to the worktree (its path is in the prompt).
            command: `echo done > ${file} && printf '%s' '${result}' > "$(ls -d ../.fleet-task-*)/RESULT.json"`,
            description: "write the file and the result",
          },
        },
      ],
      usage: SCRIPTED_USAGE,
    },
    { text: `Added ${file}.`, usage: SCRIPTED_USAGE },
  ];
};

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function localRun(fleetYml: string, turns: ReturnType<typeof runTurns>) {
  const repo = await tempGitRepo({ ".github/fleet.yml": fleetYml });
  const home = await tempHome();
  cleanups.push(repo.cleanup, home.cleanup);
  const env = cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: "sk-ant-local-test-credential-0000" });
  const cli = (...args: string[]) => fleet(args, { cwd: repo.dir, env });
  const created = await cli(
    "bd",
    "create",
    "--title",
    "Widget parser",
    "--description",
    "Parse widgets.",
    "--json",
  );
  expect(created.exitCode, created.stderr).toBe(0);
  const task = JSON.parse(created.stdout) as { id: string; issue: number };
  let model: ScriptServer | undefined;
  try {
    model = await startAnthropicScriptServer({ turns });
    const run = await cli(...scriptedRunArgs(model.url));
    expect(run.exitCode, run.stderr).toBe(0);
    // Filing used to fail in local mode (its GitHub stand-in could not list or create issues).
    expect(run.stderr).not.toMatch(/filing the follow-ups .* failed/);
  } finally {
    await model?.stop();
  }
  const state = await createLocalStateStore({ home: home.dir }).read();
  return { repo: repo.dir, task, state };
}

describe("discovered work in local mode", () => {
  it("files each follow-up as a local issue of the task's repository, linked discovered-from, not queued", async () => {
    const { repo, task, state } = await localRun(
      FLEET_YML,
      runTurns("PARSER.md", ["Add tests for the widget parser", "Document the `--dry-run` flag"]),
    );
    const done = state.doc.tasks[task.id];
    expect(done).toMatchObject({ state: "pr-open", pr: 2 });
    const issues = localIssuesOf(state.doc);
    const filed = Object.values(issues).filter((i) => i.number !== task.issue);
    expect(filed.map((i) => [i.number, i.title])).toEqual([
      [3, "Add tests for the widget parser"],
      [4, "Document the `--dry-run` flag"],
    ]);
    for (const i of filed) {
      expect(i.body).toContain(`Discovered while working on #${task.issue} (pull request #2).`);
      expect(i).toMatchObject({ state: "open", labels: [], repository: { path: repo } });
      // Not queued: nobody asked a coder to work on it.
      expect(Object.values(state.doc.tasks).some((t) => t.issue === i.number)).toBe(false);
    }
    const linked = parseJsonl(state.beads)
      .records.map((r) => r.issue)
      .filter((b) =>
        b.dependencies?.some((d) => d.type === "discovered-from" && d.depends_on_id === task.id),
      );
    expect(linked.map((b) => b.external_ref).sort()).toEqual(["gh-3", "gh-4"]);
  }, 240_000);

  it("with auto_label_discovered the follow-up gets the coder label, is queued in the same repository and runs there", async () => {
    const { repo, task, state } = await localRun(`${FLEET_YML}auto_label_discovered: true\n`, [
      ...runTurns("PARSER.md", ["Add tests for the widget parser"]),
      ...runTurns("TESTS.md", []),
    ]);
    const issue = localIssuesOf(state.doc)["3"];
    expect(issue).toMatchObject({
      title: "Add tests for the widget parser",
      labels: ["fleet:claude"],
      repository: { path: repo },
    });
    const followUp = Object.values(state.doc.tasks).find((t) => t.issue === 3);
    expect(followUp).toMatchObject({ coder: "claude", state: "pr-open", pr: 4 });
    expect(state.doc.tasks[task.id]).toMatchObject({ state: "pr-open", pr: 2 });
    // Its branch was pushed to the same repository, with the agent's file.
    const file = await execa("git", ["show", `${followUp!.branch}:TESTS.md`], { cwd: repo });
    expect(file.stdout).toBe("done");
  }, 300_000);
});
