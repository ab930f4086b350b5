import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cliEnv,
  fleet,
  SCRIPTED_USAGE,
  scriptedRunArgs,
  tempGitRepo,
  tempHome,
  USER_GIT_IDENTITY,
} from "./cli-helpers.ts";

// One $FLEET_HOME queue, two repositories: tasks run in the repository they were created in, whatever
// repository `fleet run` starts in, and `fleet merge` closes the loop in that repository.

const FLEET_YML = "plan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = SCRIPTED_USAGE;
const IDENTITY = USER_GIT_IDENTITY;

type Repo = { dir: string; cleanup: () => Promise<void> };
const git = async (cwd: string, ...args: string[]) =>
  (await execa("git", args, { cwd, env: IDENTITY })).stdout.trim();

/** A script that writes `file` in the agent's working directory, then ends. */
const writes = (file: string, text: string) => [
  {
    toolUses: [{ name: "Bash", input: { command: `echo "${text}" > ${file}`, description: "write" } }],
    usage: USAGE,
  },
  { text: `Wrote ${file}.`, usage: USAGE },
];

describe("fleet CLI, local mode, one queue for two repositories", () => {
  let a: Repo;
  let b: Repo;
  let bare: string;
  let home: { dir: string; cleanup: () => Promise<void> };
  let env: Record<string, string>;
  const inA = (...args: string[]) => fleet(args, { cwd: a.dir, env });
  const inB = (...args: string[]) => fleet(args, { cwd: b.dir, env });
  const ok = async (r: Promise<{ exitCode: number; stdout: string; stderr: string }>) => {
    const done = await r;
    expect(done.exitCode, done.stderr).toBe(0);
    return done;
  };
  const jsonOf = async (r: Promise<{ exitCode: number; stdout: string; stderr: string }>) =>
    JSON.parse((await ok(r)).stdout);
  const runWith = async (turns: ReturnType<typeof writes>, ...args: string[]) => {
    const model: ScriptServer = await startAnthropicScriptServer({ turns });
    try {
      return await inA(...scriptedRunArgs(model.url), ...args);
    } finally {
      await model.stop();
    }
  };

  beforeAll(async () => {
    a = await tempGitRepo({ "A_ONLY.md": "a\n", ".github/fleet.yml": FLEET_YML });
    b = await tempGitRepo({ "B_ONLY.md": "b\n", ".github/fleet.yml": FLEET_YML });
    bare = await mkdtemp(join(tmpdir(), "fleet-cli-origin-"));
    await git(bare, "init", "-q", "--bare");
    // A remote that is a path keeps the CLI in local mode (no GitHub repository to find).
    await git(b.dir, "remote", "add", "origin", bare);
    home = await tempHome();
    env = cliEnv({
      FLEET_HOME: home.dir,
      ANTHROPIC_API_KEY: "sk-ant-local-test-credential-0000",
      ...IDENTITY,
    });
  });
  afterAll(async () => {
    await a?.cleanup();
    await b?.cleanup();
    await rm(bare, { recursive: true, force: true });
    await home?.cleanup();
  });

  it("runs B's task in B from a worker started in A, merges it with a merge commit, unblocks A's task, then merges that into A's checkout", async () => {
    // One task at a time: the scripted model plays one run's turns after the other's.
    await ok(inA("config", "set", "max_concurrent=1"));
    const first = await jsonOf(
      inB("bd", "create", "--title", "Add AGENT.md", "--description", "Write AGENT.md.", "--json"),
    );
    expect(first.repository).toEqual({ path: b.dir, remote: bare });
    expect(first.state).toBe("dispatched");
    const second = await jsonOf(
      inA(
        "bd",
        "create",
        "--title",
        "Add AFTER.md",
        "--description",
        "Write AFTER.md.",
        "--deps",
        "1",
        "--json",
      ),
    );
    expect(second).toMatchObject({ issue: 2, state: "blocked", repository: { path: a.dir } });

    // A worker for A alone leaves B's task alone, and says where it belongs.
    const onlyA = await ok(inA("run", "--until-idle", "--poll", "200", "--repo-path", a.dir));
    expect(onlyA.stderr).toContain(`${first.id} (#1) is for ${b.dir}, which this worker does not serve`);
    expect((await jsonOf(inA("tasks", "--json"))).find((t: { id: string }) => t.id === first.id).state).toBe(
      "dispatched",
    );

    // `fleet run` in A serves every repository in the queue: B's task runs in B.
    const run = await runWith(writes("AGENT.md", "made in B"));
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toContain(`serving ${b.dir}`);
    expect(run.stderr).toMatch(new RegExp(`${first.id}: pr-opened`));
    const branch = "fleet/1-add-agent-md";
    const files = (await git(b.dir, "ls-tree", "--name-only", branch)).split("\n");
    expect(files).toEqual(expect.arrayContaining(["AGENT.md", "B_ONLY.md", "README.md"]));
    expect(files).not.toContain("A_ONLY.md");
    expect(await git(b.dir, "show", `${branch}:AGENT.md`)).toBe("made in B");
    expect(await git(a.dir, "branch", "--list", "fleet/*")).toBe("");

    const rows = await jsonOf(inA("tasks", "--all", "--json"));
    expect(rows.find((r: { id: string }) => r.id === first.id)).toMatchObject({
      state: "pr-open",
      repository: { path: b.dir, remote: bare },
    });
    const table = (await ok(inA("tasks", "--all"))).stdout;
    expect(table.split("\n")[0]).toMatch(/^ID\s+ISSUE\s+REPOSITORY\s+CODER/);
    expect(table).toMatch(new RegExp(`${first.id}\\s+#1\\s+${b.dir}\\s+claude`));
    expect(table).toMatch(new RegExp(`${second.id}\\s+#2\\s+${a.dir}\\s+claude`));

    // B's main moves on meanwhile, and the user works on another branch there: a merge commit, made
    // without touching B's checkout.
    await writeFile(join(b.dir, "LATER.md"), "later\n");
    await git(b.dir, "add", "LATER.md");
    await git(b.dir, "commit", "-q", "-m", "later");
    await git(b.dir, "checkout", "-q", "-b", "work");
    const merged = await jsonOf(inA("merge", first.id, "--json"));
    expect(merged).toMatchObject({ merged: true, how: "merge-commit", base: "main", state: "done" });
    expect(merged.unblocked).toEqual([expect.objectContaining({ id: second.id, state: "dispatched" })]);
    expect(await git(b.dir, "rev-parse", "main")).toBe(merged.sha);
    expect(await git(b.dir, "show", "main:AGENT.md")).toBe("made in B");
    expect(await git(b.dir, "show", "main:LATER.md")).toBe("later");
    expect((await git(b.dir, "rev-list", "--parents", "-n", "1", "main")).split(" ")).toHaveLength(3);
    expect(await git(b.dir, "log", "-1", "--format=%an", "main")).toBe("Dev");
    expect(await git(b.dir, "symbolic-ref", "--short", "HEAD")).toBe("work");
    const bead = await jsonOf(inA("bd", "show", first.id, "--json"));
    expect(bead.bead.status).toBe("closed");
    expect(bead.task.state).toBe("done");
    expect(bead.repository).toEqual({ path: b.dir, remote: bare });
    expect((await ok(inA("bd", "show", first.id))).stdout).toContain(`repository: ${b.dir} (${bare})`);
    const again = await inA("merge", first.id);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toMatch(/is done: it is merged or closed already/);

    // The dependent runs in A; --repo-path A serves it.
    const runA = await runWith(writes("AFTER.md", "made in A"), "--repo-path", a.dir);
    expect(runA.exitCode, runA.stderr).toBe(0);
    const branchA = "fleet/2-add-after-md";
    const filesA = (await git(a.dir, "ls-tree", "--name-only", branchA)).split("\n");
    expect(filesA).toEqual(expect.arrayContaining(["AFTER.md", "A_ONLY.md"]));
    expect(filesA).not.toContain("B_ONLY.md");

    // A's main is checked out: a dirty working tree is refused and left as it was ...
    await writeFile(join(a.dir, "README.md"), "# edited, not committed\n");
    const before = await git(a.dir, "rev-parse", "main");
    const refused = await inA("merge", second.id);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(
      /main is checked out in .* with uncommitted changes[\s\S]*Commit or stash them/,
    );
    expect(await git(a.dir, "rev-parse", "main")).toBe(before);
    expect(await readFile(join(a.dir, "README.md"), "utf8")).toBe("# edited, not committed\n");
    // ... and once clean, the fast-forward updates the working tree too.
    await git(a.dir, "checkout", "--", "README.md");
    const ff = await jsonOf(inA("merge", second.id, "--json"));
    expect(ff).toMatchObject({ merged: true, how: "fast-forward", state: "done" });
    expect(await git(a.dir, "rev-parse", "main")).toBe(await git(a.dir, "rev-parse", branchA));
    expect(await readFile(join(a.dir, "AFTER.md"), "utf8")).toBe("made in A\n");
    expect(await git(a.dir, "status", "--porcelain")).toBe("");
  }, 180_000);
  it("two repositories with the same folder name each run their own task from their own clone", async () => {
    const parent = await mkdtemp(join(tmpdir(), "fleet-cli-twins-"));
    const h = await tempHome();
    try {
      const twins = [join(parent, "one", "app"), join(parent, "two", "app")];
      for (const [i, dir] of twins.entries()) {
        await execa("mkdir", ["-p", dir]);
        await git(dir, "init", "-q", "-b", "main");
        await writeFile(join(dir, `ONLY_${i}.md`), `${i}\n`);
        await execa("mkdir", ["-p", join(dir, ".github")]);
        await writeFile(join(dir, ".github", "fleet.yml"), FLEET_YML);
        await git(dir, "add", "-A");
        await git(dir, "commit", "-q", "-m", "init");
      }
      const e = { ...env, FLEET_HOME: h.dir };
      expect((await fleet(["config", "set", "max_concurrent=1"], { cwd: twins[0]!, env: e })).exitCode).toBe(
        0,
      );
      for (const dir of twins) {
        const r = await fleet(["bd", "create", "--title", "Add AGENT.md", "--description", "d"], {
          cwd: dir,
          env: e,
        });
        expect(r.exitCode, r.stderr).toBe(0);
      }
      const model = await startAnthropicScriptServer({
        turns: [...writes("AGENT.md", "first"), ...writes("AGENT.md", "second")],
      });
      try {
        const run = await fleet(scriptedRunArgs(model.url), { cwd: parent, env: e });
        expect(run.exitCode, run.stderr).toBe(0);
        expect(model.played).toBe(4);
      } finally {
        await model.stop();
      }
      // Each has its own clone cache: a shared one would mix the two repositories' branches.
      const caches = (await readdir(join(h.dir, "work", "repos", "local"))).filter((d) => d.endsWith(".git"));
      expect(caches).toHaveLength(2);
      for (const c of caches) expect(c).toMatch(/^app-[0-9a-f]{8}\.git$/);
      for (const [i, dir] of twins.entries()) {
        const branch = (await git(dir, "branch", "--list", "fleet/*", "--format=%(refname:short)")).trim();
        const files = (await git(dir, "ls-tree", "--name-only", branch)).split("\n");
        expect(files).toEqual(expect.arrayContaining(["AGENT.md", `ONLY_${i}.md`]));
        expect(files).not.toContain(`ONLY_${1 - i}.md`);
      }
    } finally {
      await rm(parent, { recursive: true, force: true });
      await h.cleanup();
    }
  }, 180_000);

  it("two repositories with the same folder name served by separate fleet run processes keep separate clone caches", async () => {
    const parent = await mkdtemp(join(tmpdir(), "fleet-cli-twins-"));
    const h = await tempHome();
    try {
      const twins = [join(parent, "one", "app"), join(parent, "two", "app")];
      const e = { ...env, FLEET_HOME: h.dir };
      const caches = async () =>
        (await readdir(join(h.dir, "work", "repos", "local"))).filter((d) => d.endsWith(".git")).sort();
      const seen: string[][] = [];
      // The second folder first, each by its own process (as after a restart in another order).
      for (const [i, dir] of [...twins.entries()].reverse()) {
        await execa("mkdir", ["-p", join(dir, ".github")]);
        await git(dir, "init", "-q", "-b", "main");
        await writeFile(join(dir, `ONLY_${i}.md`), `${i}\n`);
        await writeFile(join(dir, ".github", "fleet.yml"), FLEET_YML);
        await git(dir, "add", "-A");
        await git(dir, "commit", "-q", "-m", "init");
        const created = await fleet(["bd", "create", "--title", "Add AGENT.md", "--description", "d"], {
          cwd: dir,
          env: e,
        });
        expect(created.exitCode, created.stderr).toBe(0);
        const model = await startAnthropicScriptServer({ turns: writes("AGENT.md", `made in ${i}`) });
        try {
          const run = await fleet(
            [
              "run",
              "--until-idle",
              "--poll",
              "300",
              "--repo-path",
              dir,
              "--model-base-url",
              model.url,
              "--agent-env",
              "CLAUDE_CODE_MAX_RETRIES=0",
            ],
            { cwd: dir, env: e },
          );
          expect(run.exitCode, run.stderr).toBe(0);
          expect(model.played).toBe(2);
        } finally {
          await model.stop();
        }
        seen.push(await caches());
      }
      expect(seen[0]).toHaveLength(1);
      expect(seen[1]).toHaveLength(2);
      expect(seen[1]).toEqual(expect.arrayContaining(seen[0]!));
      for (const [i, dir] of twins.entries()) {
        const branch = (await git(dir, "branch", "--list", "fleet/*", "--format=%(refname:short)")).trim();
        expect(await git(dir, "show", `${branch}:AGENT.md`)).toBe(`made in ${i}`);
        const files = (await git(dir, "ls-tree", "--name-only", branch)).split("\n");
        expect(files).toContain(`ONLY_${i}.md`);
        expect(files).not.toContain(`ONLY_${1 - i}.md`);
      }
    } finally {
      await rm(parent, { recursive: true, force: true });
      await h.cleanup();
    }
  }, 180_000);
});
