import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type ScriptServer, type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterEach, describe, expect, it } from "vitest";
import { localCommentsPath, readLocalComments, readLocalPulls } from "../../src/queue/local-github.ts";
import {
  cliEnv,
  fleet,
  mapLimit,
  SCRIPTED_USAGE,
  scriptedRunArgs,
  tempGitRepo,
  tempHome,
  USER_GIT_IDENTITY,
} from "./cli-helpers.ts";

// Local mode closes the loop: a conflicting merge starts the rebase run, a plan waits for
// `fleet approve` (and a retry does not pay for it again), and an A/B run is made and compared from
// the terminal. Real CLI, real git repositories, the real Claude CLI against a scripted model.

const YML = "plan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = SCRIPTED_USAGE;
const IDENTITY = USER_GIT_IDENTITY;
const git = async (cwd: string, ...args: string[]) =>
  (await execa("git", args, { cwd, env: IDENTITY })).stdout.trim();
const bash = (command: string): ScriptTurn => ({
  toolUses: [{ name: "Bash", input: { command, description: "edit" } }],
  usage: USAGE,
});
const done = (text: string): ScriptTurn => ({ text, usage: USAGE });

type Cli = (...args: string[]) => ReturnType<typeof fleet>;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A repository with `files` and a fresh $FLEET_HOME, and the CLI run inside it. */
async function setup(files: Record<string, string>) {
  const repo = await tempGitRepo(files);
  const home = await tempHome();
  cleanups.push(repo.cleanup, home.cleanup);
  const env = cliEnv({
    FLEET_HOME: home.dir,
    ANTHROPIC_API_KEY: "sk-ant-local-test-credential-0000",
    ...IDENTITY,
  });
  const cli: Cli = (...args) => fleet(args, { cwd: repo.dir, env });
  const ok = async (...args: string[]) => {
    const r = await cli(...args);
    expect(r.exitCode, `${args.join(" ")}\n${r.stderr}`).toBe(0);
    return r;
  };
  const json = async (...args: string[]) => JSON.parse((await ok(...args, "--json")).stdout);
  const run = (model: ScriptServer) => cli(...scriptedRunArgs(model.url));
  const model = async (turns: ScriptTurn[]) => {
    const server = await startAnthropicScriptServer({ turns });
    cleanups.push(() => server.stop());
    return server;
  };
  return { repo: repo.dir, home: home.dir, cli, ok, json, run, model };
}

describe("fleet CLI, local mode: merge conflicts, plan approval, A/B runs", () => {
  it("fleet merge of a conflicting branch merges nothing and queues the rebase run; the agent resolves it and the next merge fast-forwards", async () => {
    const s = await setup({ "SHARED.md": "first\n", ".github/fleet.yml": YML });
    const task = await s.json("bd", "create", "--title", "Change SHARED.md", "--description", "Edit it.");
    const server = await s.model([
      bash('echo "from the agent" > SHARED.md'),
      done("Changed SHARED.md."),
      // The rebase run: git stops on SHARED.md and the agent writes both sides.
      bash('printf "from the user\\nfrom the agent\\n" > SHARED.md'),
      done("Kept both lines."),
    ]);
    expect((await s.run(server)).exitCode).toBe(0);
    const branch = "fleet/1-change-shared-md";
    expect(await git(s.repo, "show", `${branch}:SHARED.md`)).toBe("from the agent");

    await writeFile(join(s.repo, "SHARED.md"), "from the user\n");
    await git(s.repo, "commit", "-q", "-am", "user edit");
    const mainBefore = await git(s.repo, "rev-parse", "main");
    const conflict = await s.cli("merge", task.id, "--json");
    expect(conflict.exitCode).toBe(1);
    expect(JSON.parse(conflict.stdout)).toEqual({
      id: task.id,
      merged: false,
      conflicts: ["SHARED.md"],
      rebase: "queued",
    });
    expect(await git(s.repo, "rev-parse", "main")).toBe(mainBefore);
    expect(await readFile(join(s.repo, "SHARED.md"), "utf8")).toBe("from the user\n");
    const queued = (await s.json("bd", "show", task.id)).task;
    expect(queued.rebase).toMatchObject({ onlyIfConflicting: true });
    expect(queued.state).toBe("dispatched");

    const rebase = await s.run(server);
    expect(rebase.exitCode, rebase.stderr).toBe(0);
    expect(server.played).toBe(4);
    const rebased = (await s.json("bd", "show", task.id)).task;
    expect(rebased.state).toBe("pr-open");
    // The rebase is reported on the pull request's record (#2: issues and pulls share numbers).
    expect(rebased.pr).toBe(2);
    const onPull = JSON.parse(await readFile(localCommentsPath(s.home, 2), "utf8")) as Array<{
      body: string;
    }>;
    expect(onPull.map((c) => c.body).join("\n")).toMatch(/Fleet rebased this pull request[\s\S]*SHARED\.md/);
    // The branch now sits on the user's commit, with the agent's resolution.
    await git(s.repo, "merge-base", "--is-ancestor", mainBefore, branch);
    expect(await git(s.repo, "show", `${branch}:SHARED.md`)).toBe("from the user\nfrom the agent");

    const merged = await s.json("merge", task.id);
    expect(merged).toMatchObject({ merged: true, how: "fast-forward", state: "done" });
    expect(await readFile(join(s.repo, "SHARED.md"), "utf8")).toBe("from the user\nfrom the agent\n");
  }, 180_000);

  it("fleet merge never overwrites the user's ignored or untracked files: it names them and moves nothing until they are moved away", async () => {
    const s = await setup({ ".gitignore": ".env\n", ".github/fleet.yml": YML });
    const task = await s.json("bd", "create", "--title", "Track env", "--description", "Add .env.");
    // The branch stops ignoring .env and tracks one, and adds NOTES.md.
    const server = await s.model([
      bash(
        'printf "node_modules/\\n" > .gitignore && echo "FROM=agent" > .env && echo "agent notes" > NOTES.md',
      ),
      done("Tracked .env."),
    ]);
    const ran = await s.run(server);
    expect(ran.exitCode, ran.stderr).toBe(0);
    const branch = "fleet/1-track-env";
    expect(await git(s.repo, "show", `${branch}:.env`)).toBe("FROM=agent");
    expect(await git(s.repo, "show", `${branch}:NOTES.md`)).toBe("agent notes");

    // The user's own .env (ignored on main) and NOTES.md (untracked) sit in the checkout of main.
    await writeFile(join(s.repo, ".env"), "SECRET=mine\n");
    await writeFile(join(s.repo, "NOTES.md"), "my notes\n");
    const unchanged = async (mainSha: string) => {
      expect(await git(s.repo, "rev-parse", "main")).toBe(mainSha);
      expect(await readFile(join(s.repo, ".env"), "utf8")).toBe("SECRET=mine\n");
      expect((await s.json("bd", "show", task.id)).task.state).toBe("pr-open");
    };
    // A fast-forward is refused, naming both files.
    let mainSha = await git(s.repo, "rev-parse", "main");
    const ff = await s.cli("merge", task.id);
    expect(ff.exitCode).toBe(1);
    expect(ff.stderr).toContain("would overwrite files there that git does not track");
    expect(ff.stderr).toContain("  .env (ignored)");
    expect(ff.stderr).toContain("  NOTES.md (untracked)");
    expect(ff.stderr).toMatch(/Move them out of .*Nothing was merged/);
    await unchanged(mainSha);
    expect(await readFile(join(s.repo, "NOTES.md"), "utf8")).toBe("my notes\n");

    // So is a merge commit (main moved), with NOTES.md moved away: .env alone is named.
    await writeFile(join(s.repo, "LATER.md"), "later\n");
    await git(s.repo, "add", "LATER.md");
    await git(s.repo, "commit", "-q", "-m", "later");
    await writeFile(join(s.repo, "NOTES.mine.md"), await readFile(join(s.repo, "NOTES.md"), "utf8"));
    await rm(join(s.repo, "NOTES.md"));
    mainSha = await git(s.repo, "rev-parse", "main");
    const mc = await s.cli("merge", task.id);
    expect(mc.exitCode).toBe(1);
    expect(mc.stderr).toContain("  .env (ignored)");
    expect(mc.stderr).not.toContain("NOTES.md");
    await unchanged(mainSha);

    // Once .env is moved too, the merge goes through and brings the branch's files.
    await writeFile(join(s.repo, ".env.mine"), await readFile(join(s.repo, ".env"), "utf8"));
    await rm(join(s.repo, ".env"));
    const merged = await s.json("merge", task.id);
    expect(merged).toMatchObject({ merged: true, how: "merge-commit", state: "done" });
    expect(await readFile(join(s.repo, ".env"), "utf8")).toBe("FROM=agent\n");
    expect(await readFile(join(s.repo, ".env.mine"), "utf8")).toBe("SECRET=mine\n");
    expect(await readFile(join(s.repo, "NOTES.mine.md"), "utf8")).toBe("my notes\n");
  }, 180_000);

  it("fleet merge merges into the base recorded at bd create, not the checkout's HEAD, and refuses when the base is unknown or the task's own branch", async () => {
    const s = await setup({ ".github/fleet.yml": YML });
    await s.ok("config", "set", "max_concurrent=1");
    const one = await s.json("bd", "create", "--title", "One", "--description", "Write ONE.md.");
    const two = await s.json("bd", "create", "--title", "Two", "--description", "Write TWO.md.");
    const server = await s.model([
      bash('echo "one" > ONE.md'),
      done("one"),
      bash('echo "two" > TWO.md'),
      done("two"),
    ]);
    const ran = await s.run(server);
    expect(ran.exitCode, ran.stderr).toBe(0);
    expect(server.played).toBe(4);
    const mainBefore = await git(s.repo, "rev-parse", "main");
    // The user checks the task's branch out to look at it, and the local pull records are lost.
    await git(s.repo, "checkout", "-q", "fleet/1-one");
    await writeFile(join(s.home, "local", "pulls.json"), "[]\n");

    // The base recorded on #1 at bd create is main: the branch lands there, not "into itself".
    const merged = await s.json("merge", one.id);
    expect(merged).toMatchObject({ merged: true, how: "fast-forward", base: "main", state: "done" });
    expect(await git(s.repo, "rev-parse", "main")).toBe(await git(s.repo, "rev-parse", "fleet/1-one"));
    expect(await git(s.repo, "rev-parse", "main")).not.toBe(mainBefore);
    expect(await git(s.repo, "symbolic-ref", "--short", "HEAD")).toBe("fleet/1-one");

    // An issue from before Fleet recorded the base, with no pull record: refused, and --base names it.
    const statePath = join(s.home, "state", ".fleet", "state.json");
    const state = JSON.parse(await readFile(statePath, "utf8"));
    expect(state.local_issues["2"].base).toBe("main");
    delete state.local_issues["2"].base;
    await writeFile(statePath, JSON.stringify(state));
    const mainNow = await git(s.repo, "rev-parse", "main");
    const unknown = await s.cli("merge", two.id);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toContain(
      `Fleet does not know which branch fleet/2-two of ${two.id} (#2) merges into`,
    );
    expect(unknown.stderr).toContain(`fleet merge ${two.id} --base <branch>`);
    const itself = await s.cli("merge", two.id, "--base", "fleet/2-two");
    expect(itself.exitCode).toBe(1);
    expect(itself.stderr).toMatch(/a branch cannot be merged into itself[\s\S]*Nothing was merged/);
    expect(await git(s.repo, "rev-parse", "main")).toBe(mainNow);
    expect((await s.json("bd", "show", two.id)).task.state).toBe("pr-open");
    const named = await s.json("merge", two.id, "--base", "main");
    expect(named).toMatchObject({ merged: true, how: "merge-commit", base: "main", state: "done" });
    expect(await git(s.repo, "show", "main:TWO.md")).toBe("two");
    expect(await git(s.repo, "show", "main:ONE.md")).toBe("one");
  }, 180_000);

  it("after a merge, another task's branch that now conflicts with the base gets its rebase run, as on GitHub", async () => {
    const s = await setup({ "SHARED.md": "first\n", ".github/fleet.yml": YML });
    await s.ok("config", "set", "max_concurrent=1");
    const one = await s.json("bd", "create", "--title", "One", "--description", "Write one.");
    const two = await s.json("bd", "create", "--title", "Two", "--description", "Write two.");
    const server = await s.model([
      bash('echo "one" > SHARED.md'),
      done("one"),
      bash('echo "two" > SHARED.md'),
      done("two"),
      bash('printf "one\\ntwo\\n" > SHARED.md'),
      done("Kept both."),
    ]);
    expect((await s.run(server)).exitCode).toBe(0);
    expect(server.played).toBe(4);
    const merged = await s.json("merge", one.id);
    expect(merged).toMatchObject({ how: "fast-forward", state: "done" });
    expect(merged.rebased).toEqual([{ id: two.id, issue: 2, files: ["SHARED.md"] }]);
    expect((await s.json("bd", "show", two.id)).task.rebase.why).toBe("`fleet/1-one` was merged into `main`");

    const rebase = await s.run(server);
    expect(rebase.exitCode, rebase.stderr).toBe(0);
    expect(server.played).toBe(6);
    expect(await git(s.repo, "show", "fleet/2-two:SHARED.md")).toBe("one\ntwo");
    expect(await s.json("merge", two.id)).toMatchObject({ how: "fast-forward", state: "done", rebased: [] });
    expect(await git(s.repo, "show", "main:SHARED.md")).toBe("one\ntwo");
  }, 180_000);

  it("plan_approval: the plan waits for fleet approve, the work phase gets it, and a retry after a failed work phase does not plan again", async () => {
    const s = await setup({
      ".github/fleet.yml":
        "plan_phase: true\nplan_approval: true\nretries: { max: 0 }\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n",
    });
    const task = await s.json(
      "bd",
      "create",
      "--title",
      "Add PLANNED.md",
      "--description",
      "Write PLANNED.md.",
    );
    const server = await s.model([
      done("1. Write PLANNED.md with one line."),
      // The first work phase fails at the model; the retried one does the work.
      { error: { status: 500 } },
      bash('echo "planned" > PLANNED.md'),
      done("Wrote PLANNED.md."),
    ]);
    expect((await s.run(server)).exitCode).toBe(0);
    expect(server.played).toBe(1);
    expect((await s.json("bd", "show", task.id)).task.state).toBe("awaiting-approval");
    expect((await s.ok("task", task.id, "plan")).stdout).toContain("1. Write PLANNED.md with one line.");
    const retryFirst = await s.cli("retry", task.id);
    expect(retryFirst.exitCode).toBe(1);
    expect(retryFirst.stderr).toContain(`waits for its plan to be approved: \`fleet approve ${task.id}\``);
    // Local mode speaks local: the tracking comment names the command, and offers no `/fleet` ones.
    const tracking = (await readLocalComments(s.home, task.issue)).find((c) =>
      c.body.includes(`fleet:tracking ${task.id}`),
    );
    expect(tracking?.body).toContain(`\`fleet approve ${task.id}\``);
    expect(tracking?.body).not.toContain("/fleet");

    const approved = await s.json("approve", task.id);
    expect(approved).toMatchObject({ id: task.id, approved: true, state: "dispatched" });
    expect((await s.run(server)).exitCode).toBe(0);
    expect(server.played).toBe(2);
    const failed = (await s.json("bd", "show", task.id)).task;
    expect(failed).toMatchObject({ state: "failed", approved: true });

    expect((await s.json("retry", task.id)).approved).toBe(true);
    const retried = await s.run(server);
    expect(retried.exitCode, retried.stderr).toBe(0);
    // Two more turns, both work: had the retry planned again, the plan phase would have taken one.
    expect(server.played).toBe(4);
    expect((await s.json("bd", "show", task.id)).task.state).toBe("pr-open");
    expect(await git(s.repo, "show", "fleet/1-add-planned-md:PLANNED.md")).toBe("planned");
    const pull = (await readLocalPulls(s.home)).find((p) => p.head === "fleet/1-add-planned-md");
    expect(pull?.body).toContain(`\`fleet merge ${task.id}\` merges it`);
    expect(pull?.body).not.toContain("never merges");
    // The work phase was given the approved plan.
    const workPrompts = JSON.stringify(server.requests.filter((r) => r.kind === "main").slice(2));
    expect(workPrompts).toContain("1. Write PLANNED.md with one line.");
  }, 180_000);

  it("an A/B run from the terminal: one issue, one task and branch per side, compared like the GitHub comment", async () => {
    const s = await setup({ ".github/fleet.yml": YML });
    await s.ok("config", "set", "max_concurrent=1");
    const created = await s.json(
      "bd",
      "create",
      "--title",
      "Add AB.md",
      "--description",
      "Write AB.md.",
      "--ab",
      "claude:sonnet,claude:opus",
    );
    expect(created.issue).toBe(1);
    expect(created.tasks.map((t: { coder: string; model: string }) => `${t.coder}:${t.model}`)).toEqual([
      "claude:sonnet",
      "claude:opus",
    ]);
    const [one, two] = created.tasks.map((t: { id: string }) => t.id);
    const early = await s.ok("task", one, "compare");
    expect(early.stdout).toMatch(/Not every side has finished/);

    const server = await s.model([
      bash('echo "side" > AB.md'),
      done("Wrote AB.md."),
      bash('echo "side" > AB.md'),
      done("Wrote AB.md."),
    ]);
    expect((await s.run(server)).exitCode).toBe(0);
    const branches = (await git(s.repo, "branch", "--list", "fleet/*", "--format=%(refname:short)")).split(
      "\n",
    );
    expect(branches).toHaveLength(2);
    for (const b of branches) expect(await git(s.repo, "show", `${b}:AB.md`)).toBe("side");

    const compared = await s.json("task", one, "compare");
    expect(compared.finished).toBe(true);
    expect(compared.sides.map((x: { taskId: string }) => x.taskId)).toEqual([one, two]);
    for (const side of compared.sides) {
      expect(side).toMatchObject({ state: "pr-open", diff: { files: 1, additions: 1, deletions: 0 } });
      expect(side.totals.usage.input).toBe(1800);
    }
    const table = (await s.ok("task", two, "compare")).stdout;
    expect(table).toContain("### ⚖️ Fleet A/B comparison for #1");
    expect(table).toMatch(/\|\s+\|\s+`claude:sonnet`\s+\|\s+`claude:opus`\s+\|/);
    expect(table).toMatch(/\| Diff \| 1 files, \+1 −0 \| 1 files, \+1 −0 \|/);
    expect(table).not.toContain("<!--");
  }, 180_000);

  it("answers bad input for the new commands and flags clearly, and keeps every repeated --coder", async () => {
    const s = await setup({ ".github/fleet.yml": YML });
    const ab = await s.json(
      "bd",
      "create",
      "--title",
      "T",
      "--description",
      "d",
      "--coder",
      "claude",
      "--coder",
      "codex",
    );
    expect(ab.tasks.map((t: { coder: string }) => t.coder)).toEqual(["claude", "codex"]);
    const shown = await Promise.all(ab.tasks.map((t: { id: string }) => s.json("bd", "show", t.id)));
    const branchesOf = shown.map((x) => x.task.branch);
    expect(new Set(branchesOf).size).toBe(2);
    const single = await s.json("bd", "create", "--title", "One", "--description", "d", "--model", "opus");
    expect(single).toMatchObject({ coder: "claude", model: "opus" });
    const outside = await tempHome();
    cleanups.push(outside.cleanup);

    const create = ["bd", "create", "--title", "x", "--description", "y"];
    const cases: Array<[string[], number, RegExp]> = [
      [[...create, "--title", "z"], 2, /--title was given more than once; give it once/],
      [[...create, "--ab", "claude"], 2, /--ab needs at least two sides/],
      [[...create, "--ab", "claude,codex", "--coder", "claude"], 2, /leave out --coder and --model/],
      [[...create, "--coder", "claude", "--coder", "claude"], 2, /claude:sonnet is asked for twice/],
      [
        [...create, "--coder", "claude", "--coder", "codex", "--model", "a", "--model", "b", "--model", "c"],
        2,
        /3 --model for 2 --coder/,
      ],
      [
        ["config", "set", "max_concurrent=2", "max_concurrent=5"],
        2,
        /max_concurrent is assigned more than once/,
      ],
      [["merge"], 2, /needs a task id/],
      [["merge", "fl-zzz"], 3, /No task "fl-zzz"/],
      [
        ["merge", single.id],
        1,
        /is dispatched: only a task whose branch is pushed \(pr-open\) can be merged/,
      ],
      [["approve", "fl-zzz"], 3, /No task "fl-zzz"/],
      [["approve", single.id], 1, /only a task whose plan waits for approval/],
      [["retry", single.id], 1, /only failed, cancelled or rate-limited tasks can be retried/],
      [["task", single.id, "compare"], 1, /is not an A\/B run.*--coder claude --coder codex/],
      [["task", single.id, "compare", "-f"], 2, /applies to log only/],
    ];
    const results = await mapLimit(cases, 4, ([args]) => s.cli(...args));
    results.forEach((r, i) => {
      const [args, code, message] = cases[i]!;
      expect({ args, code: r.exitCode }).toEqual({ args, code });
      expect(r.stderr, args.join(" ")).toMatch(message);
    });
    const notGit = await fleet([...create, "--local"], {
      cwd: outside.dir,
      env: cliEnv({ FLEET_HOME: outside.dir }),
    });
    expect(notGit.exitCode).toBe(1);
    expect(notGit.stderr).toMatch(
      /is not in a git repository: local tasks run in the repository they were created in/,
    );
    for (const cmd of ["merge", "approve"]) {
      const help = await s.cli(cmd, "--help");
      expect(help.exitCode).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`^Usage: fleet ${cmd} <id>`));
    }
  }, 120_000);

  it("a task queued before repositories were recorded runs only where its name matches, and fleet run says so elsewhere", async () => {
    const s = await setup({ ".github/fleet.yml": YML });
    const task = await s.json("bd", "create", "--title", "Old", "--description", "d");
    // State written by an older Fleet: the local issue has no repository.
    const statePath = join(s.home, "state", ".fleet", "state.json");
    const state = JSON.parse(await readFile(statePath, "utf8"));
    delete state.local_issues["1"].repository;
    await writeFile(statePath, JSON.stringify(state));
    const other = await tempGitRepo({ ".github/fleet.yml": YML });
    cleanups.push(other.cleanup);
    const env = cliEnv({ FLEET_HOME: s.home });
    const elsewhere = await fleet(["run", "--until-idle", "--poll", "200"], { cwd: other.dir, env });
    expect(elsewhere.exitCode).toBe(0);
    const name = s.repo.split("/").pop();
    expect(elsewhere.stderr).toContain(
      `${task.id} (#1) was queued before Fleet recorded each task's repository: it runs only in a repository named "${name}"`,
    );
    expect((await s.json("tasks")).map((t: { id: string; repo: string }) => [t.id, t.repo])).toEqual([
      [task.id, `local/${name}`],
    ]);
    expect((await s.ok("tasks")).stdout).toContain(`local/${name} (not recorded)`);
    // In the repository of its name it runs.
    const server = await s.model([bash('echo "old" > OLD.md'), done("Wrote OLD.md.")]);
    const here = await s.run(server);
    expect(here.exitCode, here.stderr).toBe(0);
    expect((await s.json("bd", "show", task.id)).task.state).toBe("pr-open");
    expect(await git(s.repo, "show", "fleet/1-old:OLD.md")).toBe("old");
    expect(await git(other.dir, "branch", "--list", "fleet/*")).toBe("");
  }, 60_000);
  it("a task whose repository is gone waits, and fleet run says why instead of running it elsewhere", async () => {
    const s = await setup({ ".github/fleet.yml": YML });
    const gone = await tempGitRepo({ ".github/fleet.yml": YML });
    const env = cliEnv({ FLEET_HOME: s.home });
    const created = await fleet(["bd", "create", "--title", "Lost", "--description", "d", "--json"], {
      cwd: gone.dir,
      env,
    });
    const task = JSON.parse(created.stdout);
    await gone.cleanup();
    const r = await s.cli("run", "--until-idle", "--poll", "200");
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(`cannot serve ${gone.dir} (task ${task.id}, #1)`);
    expect(r.stderr).toContain("Its tasks wait; `fleet kill <id>` drops them.");
    expect(r.stderr).toMatch(/nothing to do/);
    expect((await s.json("bd", "show", task.id)).task.state).toBe("dispatched");
    expect(await git(s.repo, "branch", "--list", "fleet/*")).toBe("");
  }, 60_000);
});
