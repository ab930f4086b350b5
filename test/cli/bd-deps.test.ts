// `fleet bd create` refuses what would leave a task waiting or failing for ever (a dependency on an
// issue that does not exist, a repository with no commit), and `fleet bd update` changes dependencies:
// in local mode directly, on GitHub through the issue's text, which the real Fleet app reads.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness.ts";
import { cliEnv, fleet, tempGitRepo, tempHome } from "./cli-helpers.ts";

const FLEET_YML = "dispatch: local\nplan_phase: false\n";

describe("fleet bd dependencies and first commits, local mode", () => {
  let repo: { dir: string; cleanup: () => Promise<void> };
  let home: { dir: string; cleanup: () => Promise<void> };
  let env: Record<string, string>;
  const cli = (...args: string[]) => fleet(args, { cwd: repo.dir, env });
  const json = async (...args: string[]) => {
    const r = await cli(...args, "--json");
    expect(r.exitCode, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };
  const task = async (id: string) => (await json("bd", "show", id)).task;

  beforeAll(async () => {
    repo = await tempGitRepo({ ".github/fleet.yml": FLEET_YML });
    home = await tempHome();
    env = cliEnv({ FLEET_HOME: home.dir, ANTHROPIC_API_KEY: "sk-ant-local-test-credential-0000" });
  });
  afterAll(async () => {
    await repo?.cleanup();
    await home?.cleanup();
  });

  it("refuses a dependency on an issue that does not exist, naming it, and creates nothing", async () => {
    const r = await cli("bd", "create", "--title", "Waits", "--description", "d", "--deps", "99");
    expect(r.exitCode).toBe(3);
    expect(r.stderr).toContain("--deps: #99 is not an issue in local state");
    expect(r.stderr).toContain("would wait for ever");
    expect(await json("bd", "list", "--all")).toEqual([]);
  });

  it("refuses a task in a repository with no commit, saying to commit one first", async () => {
    const empty = await mkdtemp(join(tmpdir(), "fleet-empty-repo-"));
    try {
      await execa("git", ["init", "-q", "-b", "main"], { cwd: empty });
      const r = await fleet(["bd", "create", "--title", "T", "--description", "d"], { cwd: empty, env });
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain(`${empty} has no commit yet`);
      expect(r.stderr).toContain("Commit a first commit");
      expect(await json("bd", "list", "--all")).toEqual([]);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it("update --deps replaces, --add-dep and --remove-dep change, the dependencies; the task waits or runs as they say", async () => {
    const a = await json("bd", "create", "--title", "A", "--description", "First.");
    const b = await json("bd", "create", "--title", "B", "--description", "Second.");
    const c = await json(
      "bd",
      "create",
      "--title",
      "C",
      "--description",
      "Third.",
      "--deps",
      String(a.issue),
    );
    expect(c.state).toBe("blocked");

    await json("bd", "update", c.id, "--deps", `#${b.issue}`);
    expect(await task(c.id)).toMatchObject({
      state: "blocked",
      dependsOn: [b.issue],
      reason: `blocked by #${b.issue}`,
    });
    const shown = await json("bd", "show", c.id);
    expect(shown.bead.description).toBe(`Third.\n\nDepends on #${b.issue}`);

    await json("bd", "update", c.id, "--add-dep", a.id);
    expect((await task(c.id)).dependsOn).toEqual([a.issue, b.issue]);

    // Nothing left to wait for: the task is run.
    const cleared = await cli("bd", "update", c.id, "--remove-dep", `${a.issue},${b.issue}`);
    expect(cleared.exitCode, cleared.stderr).toBe(0);
    expect(cleared.stdout).toContain("depends on nothing; task dispatched");
    expect(await task(c.id)).toMatchObject({ state: "dispatched", dependsOn: [] });
    expect((await json("bd", "show", c.id)).bead.description).toBe("Third.");

    const missing = await cli("bd", "update", c.id, "--add-dep", "99");
    expect(missing.exitCode).toBe(3);
    expect(missing.stderr).toContain("--deps: #99 is not an issue");
    const notThere = await cli("bd", "update", c.id, "--remove-dep", String(a.issue));
    expect(notThere.exitCode).toBe(2);
    expect(notThere.stderr).toContain(`#${c.issue} does not depend on #${a.issue}; it depends on nothing`);
    const both = await cli("bd", "update", c.id, "--deps", "none", "--add-dep", String(a.issue));
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toContain("--deps replaces the dependencies");
  });

  it("refuses dependencies that close a cycle, or a task depending on itself", async () => {
    const x = await json("bd", "create", "--title", "X", "--description", "x");
    const y = await json("bd", "create", "--title", "Y", "--description", "y", "--deps", String(x.issue));
    const cycle = await cli("bd", "update", x.id, "--deps", String(y.issue));
    expect(cycle.exitCode).toBe(2);
    expect(cycle.stderr).toContain(`close a cycle (#${x.issue} -> #${y.issue} -> #${x.issue})`);
    const self = await cli("bd", "update", x.id, "--add-dep", String(x.issue));
    expect(self.exitCode).toBe(2);
    expect(self.stderr).toContain("cannot depend on itself");
    expect((await task(x.id)).dependsOn).toEqual([]);
  });
});

describe("fleet bd dependencies and first commits, against GitHub with the real Fleet app", () => {
  let h: Harness;
  let home: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) =>
    fleet([...args, "--repo", h.full, "--api-url", h.gh.url], { cwd: home, env });
  const byIssue = async (n: number) => (await h.tasks()).find((t) => t.issue === n)!;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    home = await mkdtemp(join(tmpdir(), "fleet-bd-deps-gh-"));
    env = cliEnv({ FLEET_HOME: home, GITHUB_TOKEN: h.gh.userToken("mona") });
  });
  afterAll(async () => {
    await h?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it("refuses a dependency on an issue that does not exist, and opens no issue", async () => {
    const r = await cli("bd", "create", "--title", "Waits", "--description", "d", "--deps", "99");
    expect(r.exitCode).toBe(3);
    expect(r.stderr).toContain("--deps: #99 is not an issue in octo-org/widgets");
    const { data } = await h.mona.rest.issues.listForRepo({ owner: h.owner, repo: h.name, state: "all" });
    expect(data).toEqual([]);
  });

  it("refuses a task in a repository with no commit", async () => {
    await h.gh.createRepo({ owner: h.owner, name: "empty", files: {} });
    h.gh.addCollaborator(`${h.owner}/empty`, "mona", "write");
    const r = await fleet(
      [
        "bd",
        "create",
        "--title",
        "T",
        "--description",
        "d",
        "--repo",
        `${h.owner}/empty`,
        "--api-url",
        h.gh.url,
      ],
      { cwd: home, env },
    );
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain("octo-org/empty has no commit on its default branch main");
    expect(r.stderr).toContain("Push a first commit");
  });

  it("update --deps rewrites the issue's Depends on lines, and the app blocks or runs the task as they say", async () => {
    const a = await h.newIssue("A", "First.");
    const b = await h.newIssue("B", `Second.\n\nDepends on #${a}`);
    await h.label(a, "fleet:claude");
    await h.label(b, "fleet:claude");
    expect(await byIssue(b)).toMatchObject({ state: "blocked", dependsOn: [a] });

    const cleared = await cli("bd", "update", `#${b}`, "--deps", "none");
    expect(cleared.exitCode, cleared.stderr).toBe(0);
    await h.settle();
    expect(h.gh.issue(h.full, b)!.body).toBe("Second.");
    expect(await byIssue(b)).toMatchObject({ state: "dispatched", dependsOn: [] });

    const c = await h.newIssue("C", `Third.\nDepends on #${a}`);
    await h.label(c, "fleet:claude");
    expect(await byIssue(c)).toMatchObject({ state: "blocked", dependsOn: [a] });
    const replaced = await cli("bd", "update", `#${c}`, "--deps", String(b));
    expect(replaced.exitCode, replaced.stderr).toBe(0);
    await h.settle();
    expect(h.gh.issue(h.full, c)!.body).toBe(`Third.\n\nDepends on #${b}`);
    expect(await byIssue(c)).toMatchObject({ state: "blocked", dependsOn: [b], reason: `blocked by #${b}` });

    // A task already started keeps going; the dependency holds a later run.
    const started = await cli("bd", "update", `#${a}`, "--add-dep", String(c));
    expect(started.exitCode, started.stderr).toBe(0);
    expect(started.stdout).toContain("already dispatched");

    // A dependency named in a sentence is the person's to rewrite.
    const d = await h.newIssue("D", `Do this after #${a} is in; it depends on #${a} really.`);
    await h.label(d, "fleet:claude");
    const prose = await cli("bd", "update", `#${d}`, "--deps", "none");
    expect(prose.exitCode).toBe(1);
    expect(prose.stderr).toContain(`names #${a} as a dependency in a sentence`);
  });
});
