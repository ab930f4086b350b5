import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localCommentsPath } from "../../src/queue/local-github.ts";
import { agentNotesDir } from "../../src/worker/workspace/artifacts.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import {
  cliEnv,
  fleet,
  fleetProcess,
  mapLimit,
  scriptedRunArgs,
  tempGitRepo,
  tempHome,
} from "./cli-helpers.ts";

const FLEET_YML = "plan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = {
  input_tokens: 1200,
  output_tokens: 80,
  cache_read_input_tokens: 300,
  cache_creation_input_tokens: 40,
};
// Token-shaped text in the agent's output: `fleet task log` must never print it.
const LEAKED = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH";

describe("fleet CLI in local mode ($FLEET_HOME, a local git repository)", () => {
  let repo: { dir: string; cleanup: () => Promise<void> };
  let home: { dir: string; cleanup: () => Promise<void> };
  let env: Record<string, string>;
  const cli = (...args: string[]) => fleet(args, { cwd: repo.dir, env });
  const json = async (...args: string[]) => {
    const r = await cli(...args, "--json");
    expect(r.stderr).not.toContain("Error:");
    expect(r.exitCode, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    repo = await tempGitRepo({ ".github/fleet.yml": FLEET_YML });
    home = await tempHome();
    env = cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: "sk-ant-local-test-credential-0000" });
  });
  afterAll(async () => {
    await repo?.cleanup();
    await home?.cleanup();
  });

  it("creates a task, runs the real Claude CLI on it, and shows its tokens, log, plan, knowledge and result", async () => {
    const created = await json(
      "bd",
      "create",
      "--title",
      "Add FIRST.md",
      "--description",
      "Create FIRST.md.",
    );
    expect(created).toMatchObject({ issue: 1, coder: "claude", state: "dispatched" });
    const id = created.id as string;

    const notes = agentNotesDir(worktreePath(join(home.dir, "work"), id), id);
    let model: ScriptServer | undefined;
    try {
      model = await startAnthropicScriptServer({
        turns: [
          {
            toolUses: [
              { name: "Bash", input: { command: 'echo "made by fleet" > FIRST.md', description: "write" } },
              { name: "Write", input: { file_path: join(notes, "PLAN.md"), content: "1. Write FIRST.md\n" } },
              {
                name: "Write",
                input: { file_path: join(notes, "KNOWLEDGE.md"), content: "The repo has a README.\n" },
              },
              {
                name: "Write",
                input: {
                  file_path: join(notes, "RESULT.json"),
                  content: JSON.stringify({ status: "done", summary: "Add FIRST.md", testsRun: [] }),
                },
              },
            ],
            usage: USAGE,
          },
          { text: `Wrote FIRST.md. (${LEAKED})`, usage: USAGE },
        ],
      });
      const run = await cli(...scriptedRunArgs(model.url));
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stderr).toMatch(/dispatched -> running/);
      expect(run.stderr).toMatch(/pr-opened/);
    } finally {
      await model?.stop();
    }

    const rows = await json("tasks", "--all");
    expect(rows).toHaveLength(1);
    // Issues and local pull requests share one series of numbers, as on GitHub.
    expect(rows[0]).toMatchObject({ id, issue: 1, coder: "claude", state: "pr-open", pr: 2 });
    expect(rows[0].tokens).toMatchObject({ input: 2400, output: 160, cacheRead: 600, cacheWrite: 80 });
    expect(rows[0].costUsd).toBeGreaterThan(0);
    const table = await cli("tasks", "--all");
    // The repository column names where the task ran.
    expect(table.stdout).toMatch(
      new RegExp(
        `${id}\\s+#1\\s+${repo.dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s+claude\\s+sonnet\\s+pr-open`,
      ),
    );
    expect(rows[0].repository).toEqual({ path: repo.dir });
    expect(table.stdout).toContain("2400");

    // The "pull request" of local mode: the task's branch, pushed to the local repository.
    const branches = await execa("git", ["branch", "--list", "fleet/*"], { cwd: repo.dir });
    expect(branches.stdout).toContain("fleet/1-add-first-md");
    const file = await execa("git", ["show", "fleet/1-add-first-md:FIRST.md"], { cwd: repo.dir });
    expect(file.stdout).toBe("made by fleet");

    const log = await cli("task", id, "log");
    expect(log.exitCode).toBe(0);
    expect(log.stdout).toContain("Wrote FIRST.md.");
    expect(log.stdout).not.toContain(LEAKED);
    expect(log.stdout).toContain("[REDACTED]");
    // Readable by default: the agent's words and its tool calls, not the coder's JSON lines.
    expect(log.stdout).toMatch(/^> Wrote FIRST\.md\./m);
    expect(log.stdout).not.toContain('"type":');
    // The task at a glance: state, where, plan, runs, what to do next (local mode speaks local).
    const shown = (await cli("task", id)).stdout;
    expect(shown).toMatch(new RegExp(`^${id}  pr-open`));
    expect(shown).toContain("Plan\n  1. Write FIRST.md");
    expect(shown).toMatch(/Runs\n {2}1\. work .* 3,080 in, 160 out/);
    expect(shown).toContain(
      `Next: Review branch fleet/1-add-first-md in the repository, then \`fleet merge ${id}\`.`,
    );
    expect(shown).not.toMatch(/`\/fleet /);
    expect(JSON.parse((await cli("task", id, "--json")).stdout)).toMatchObject({
      task: { id, state: "pr-open" },
      next: expect.stringContaining(`fleet merge ${id}`),
    });
    const raw = await cli("task", id, "log", "--raw");
    expect(raw.stdout).toContain('"type":');
    expect(raw.stdout).not.toContain(LEAKED);
    // -f on a task that is no longer running prints the log and returns.
    const followed = await cli("task", id, "log", "-f");
    expect(followed.exitCode).toBe(0);
    expect(followed.stdout).toContain("Wrote FIRST.md.");
    expect(followed.stdout).not.toContain(LEAKED);
    expect((await cli("task", "#1", "plan")).stdout).toBe("1. Write FIRST.md");
    // What the agent learned, then what it loaded (measured before the run).
    const knowledge = (await cli("task", id, "knowledge")).stdout;
    expect(knowledge.startsWith("The repo has a README.\n")).toBe(true);
    expect(knowledge).toMatch(/### Context loaded \(claude\): ~[\d,]+ tokens per turn/);
    expect(knowledge).toContain("(prompt)");
    const knowledgeJson = JSON.parse((await cli("task", id, "knowledge", "--json")).stdout);
    expect(knowledgeJson.knowledge).toBe("The repo has a README.\n");
    expect(knowledgeJson.context.sources.some((s: { kind: string }) => s.kind === "prompt")).toBe(true);
    expect(await json("task", id, "result")).toMatchObject({ status: "done", summary: "Add FIRST.md" });
    // The log on disk is redacted as it is written, not only when shown.
    const onDisk = await readFile(join(home.dir, "work", "tasks", id, "agent.log"), "utf8");
    expect(onDisk).toContain("Wrote FIRST.md. ([REDACTED])");
    expect(onDisk).not.toContain(LEAKED);
  }, 90_000);

  it("config set max_concurrent=1 caps the scheduler: of two tasks only one is dispatched", async () => {
    const h = await tempHome();
    const e = cliEnv({ FLEET_HOME: h.dir });
    const c = (...args: string[]) => fleet(args, { cwd: repo.dir, env: e });
    try {
      expect((await c("config", "set", "max_concurrent=1")).exitCode).toBe(0);
      const shown = JSON.parse((await c("config", "show", "--json")).stdout);
      expect(shown.config.max_concurrent).toBe(1);
      expect(shown.overrides).toEqual({ max_concurrent: 1 });

      const a = JSON.parse((await c("bd", "create", "--title", "A", "--description", "a", "--json")).stdout);
      const b = JSON.parse(
        (
          await c(
            "bd",
            "create",
            "--title",
            "B",
            "--description",
            "b",
            "--priority",
            "1",
            "--deps",
            "1",
            "--json",
          )
        ).stdout,
      );
      expect(a.state).toBe("dispatched");
      expect(b.state).toBe("blocked");
      const c3 = JSON.parse((await c("bd", "create", "--title", "C", "--description", "c", "--json")).stdout);
      expect(c3.state).toBe("queued");
      const states = (rows: Array<{ id: string; state: string }>) =>
        Object.fromEntries(rows.map((r) => [r.id, r.state]));
      expect(states(JSON.parse((await c("tasks", "--json")).stdout))).toEqual({
        [a.id]: "dispatched",
        [b.id]: "blocked",
        [c3.id]: "queued",
      });

      // bd views: ready follows beads readiness (B waits for A's bead).
      const ready = JSON.parse((await c("bd", "ready", "--json")).stdout).map((x: { id: string }) => x.id);
      expect(ready).toContain(c3.id);
      expect(ready).not.toContain(b.id);
      const shownBead = JSON.parse((await c("bd", "show", b.id, "--json")).stdout);
      expect(shownBead.bead.dependencies[0]).toMatchObject({ depends_on_id: a.id, type: "blocks" });
      expect(shownBead.bead.description).toBe("b\n\nDepends on #1");

      // Killing the dispatched task frees the slot: the queued one takes it at once.
      const killed = JSON.parse((await c("kill", a.id, "--json")).stdout);
      expect(killed.state).toBe("cancelled");
      // Its tracking record (local mode's tracking comment) says so.
      const tracking = JSON.parse(await readFile(localCommentsPath(h.dir, a.issue), "utf8")) as Array<{
        body: string;
      }>;
      expect(tracking.find((x) => x.body.includes(`fleet:tracking ${a.id}`))?.body).toContain("cancelled");
      expect(states(JSON.parse((await c("tasks", "--all", "--json")).stdout))[c3.id]).toBe("dispatched");
      const retried = JSON.parse((await c("retry", "#1", "--json")).stdout);
      expect(retried.state).toBe("queued");

      // A raised cap is obeyed by the next scheduling pass (run by `config set` itself).
      expect((await c("config", "set", "max_concurrent=2")).exitCode).toBe(0);
      expect(states(JSON.parse((await c("tasks", "--json")).stdout))[a.id]).toBe("dispatched");

      const updated = JSON.parse(
        (await c("bd", "update", c3.id, "--title", "C2", "--priority", "0", "--json")).stdout,
      );
      expect(updated).toMatchObject({ title: "C2", priority: 0 });
      const closed = JSON.parse((await c("bd", "close", c3.id, "--json")).stdout);
      expect(closed.state).toBe("cancelled");
      const list = JSON.parse((await c("bd", "list", "--all", "--json")).stdout);
      expect(list.find((x: { id: string }) => x.id === c3.id)).toMatchObject({
        status: "closed",
        title: "C2",
      });
    } finally {
      await h.cleanup();
    }
  }, 180_000); // a dozen CLI processes, each loading the sources through tsx: ~90 s on a loaded 2-core machine

  it("answers bad input with a clear message and a non-zero exit code", async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [["frobnicate"], 2, /unknown command "frobnicate"/],
      [[], 2, /Usage: fleet <command>/],
      [["tasks", "--bogus"], 2, /Unknown option '--bogus'/],
      [["tasks", "--watch", "--interval", "5"], 2, /--interval must be/],
      [["task", "fl-nope", "log"], 3, /No task "fl-nope".*No artifacts at .*fl-nope/],
      [["task", "fl-nope", "diary"], 2, /use log, plan, knowledge, result or compare/],
      [["task"], 2, /needs a task/],
      [["task", "fl-nope", "plan", "-f"], 2, /applies to log only/],
      [
        ["config", "set", "max_concurrent=0"],
        2,
        /max_concurrent must be a whole number from 1 to 100; got "0"/,
      ],
      [
        ["config", "set", "max_concurent=2"],
        2,
        /Did you mean "max_concurrent"\?.*Settable keys: max_concurrent/,
      ],
      [
        ["config", "set", "default_coder=nobody"],
        2,
        /default_coder: "nobody" is not a configured coder; use one of/,
      ],
      [["config", "set", "novalue"], 2, /not an assignment: write key=value/],
      [["config", "frob"], 2, /Unknown config command "frob"/],
      [["bd", "create", "--description", "x"], 2, /needs --title/],
      [["bd", "create", "--title", "x"], 2, /needs --description/],
      [
        ["bd", "create", "--title", "x", "--description", "y", "--coder", "nobody"],
        2,
        /Unknown coder "nobody"/,
      ],
      [["bd", "create", "--title", "x", "--description", "y", "--priority", "9"], 2, /--priority must be 0/],
      [
        ["bd", "create", "--title", "x", "--description", "y", "--deps", "fl-zzz"],
        2,
        /--deps: "fl-zzz" is neither/,
      ],
      [["bd", "show"], 2, /needs a bead id/],
      [["bd", "show", "#99"], 3, /No task for issue #99/],
      [["bd", "frob"], 2, /Unknown bd command "frob"/],
      [["kill", "fl-zzz"], 3, /No task "fl-zzz"/],
      [["retry"], 2, /needs a task id/],
      [["run", "--concurrency", "0"], 2, /--concurrency must be a whole number above 0/],
      [["run", "--agent-env", "NOPE"], 2, /--agent-env takes KEY=VALUE/],
      [["tasks", "--local", "--repo", "a/b"], 2, /exclude each other/],
      [["tasks", "--repo", "not a repo"], 2, /is not a repository name/],
    ];
    const results = await mapLimit(cases, 4, ([args]) => cli(...args));
    results.forEach((r, i) => {
      const [args, code, message] = cases[i]!;
      expect({ args, code: r.exitCode }).toEqual({ args, code });
      expect(r.stderr, args.join(" ")).toMatch(message);
    });
    // Retrying a task that is not failed says why; --help works everywhere.
    const help = await mapLimit(
      ["tasks", "task", "config", "bd", "run", "kill", "retry", "serve"],
      4,
      (cmd) => cli(cmd, "--help"),
    );
    for (const h of help) {
      expect(h.exitCode).toBe(0);
      expect(h.stdout).toMatch(/^Usage: fleet /);
    }
  }, 180_000);

  it("fleet tasks --watch prints when the tasks change (not a terminal) and stops on SIGTERM", async () => {
    const h = await tempHome();
    const e = cliEnv({ FLEET_HOME: h.dir });
    try {
      const child = fleetProcess(["tasks", "--watch", "--interval", "200"], { cwd: repo.dir, env: e });
      let seen = "";
      const waitFor = (text: string) =>
        new Promise<void>((resolve) => {
          const check = () => seen.includes(text) && resolve();
          child.stdout?.on("data", (d: Buffer) => {
            seen += d.toString();
            check();
          });
          check();
        });
      await waitFor("No tasks.");
      expect(
        (await fleet(["bd", "create", "--title", "W", "--description", "w"], { cwd: repo.dir, env: e }))
          .exitCode,
      ).toBe(0);
      await waitFor("dispatched");
      child.kill("SIGTERM");
      const r = await child;
      expect(r.exitCode).toBe(0);
      expect(String(r.stdout).match(/No tasks\./g)).toHaveLength(1);
    } finally {
      await h.cleanup();
    }
  }, 60_000);

  it("fleet run stops cleanly on SIGTERM", async () => {
    const h = await tempHome();
    try {
      const child = fleetProcess(["run", "--poll", "200"], {
        cwd: repo.dir,
        env: cliEnv({ FLEET_HOME: h.dir }),
      });
      let seen = "";
      await new Promise<void>((resolve) => {
        child.stderr?.on("data", (d: Buffer) => {
          seen += d.toString();
          if (seen.includes("fleet run: worker")) resolve();
        });
      });
      child.kill("SIGTERM");
      const r = await child;
      expect(r.exitCode).toBe(0);
      expect(String(r.stderr)).toMatch(/SIGTERM: stopping agents[\s\S]*worker stopped/);
    } finally {
      await h.cleanup();
    }
  }, 60_000);
});
