import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { afterEach, describe, expect, it } from "vitest";
import type { GitHub } from "../../src/github/port.ts";
import {
  createLocalGitHub,
  LocalModeRefusal,
  type LocalPull,
  localPullsPath,
} from "../../src/queue/local-github.ts";
import { localIssuesOf } from "../../src/queue/local-issues.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { tempGitRepo, tempHome } from "../cli/cli-helpers.ts";

// Local mode's GitHub: the port over $FLEET_HOME's records and the repository on disk. pulls.json is
// read, changed and written again by `fleet run` (a pull request opened), `fleet merge` and `fleet bd
// close` (one closed): separate processes, which must not lose each other's writes.

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A node process that, from `startAt` on, marks the local pull requests of `branches` merged one by one. */
const merger = (home: string, branches: string[], startAt: number) =>
  execa(
    "node",
    [
      "--input-type=module",
      "-e",
      `import { register } from "tsx/esm/api";
register();
const { markLocalPullMerged } = await import(${JSON.stringify(resolve("src/queue/local-github.ts"))});
const [home, branches, startAt] = [process.argv[1], JSON.parse(process.argv[2]), Number(process.argv[3])];
while (Date.now() < startAt) await new Promise((r) => setTimeout(r, 5));
for (const b of branches) if (!(await markLocalPullMerged(home, b))) throw new Error("not open: " + b);`,
      home,
      JSON.stringify(branches),
      String(startAt),
    ],
    { cwd: resolve("."), timeout: 120_000 },
  );

describe("local pull records across processes", () => {
  it("two processes updating pulls.json at once lose none of each other's changes", async () => {
    const home = await tempHome();
    cleanups.push(home.cleanup);
    const n = 120;
    const branches = Array.from({ length: 2 * n }, (_, i) => `fleet/${i + 1}-x`);
    const pulls: LocalPull[] = branches.map((head, i) => ({
      number: i + 1,
      head,
      base: "main",
      title: head,
      body: "",
      state: "open",
      url: head,
    }));
    await execa("mkdir", ["-p", join(home.dir, "local")]);
    await writeFile(localPullsPath(home.dir), JSON.stringify(pulls));
    const startAt = Date.now() + 4000;
    // Interleaved halves, so both processes write throughout.
    const results = await Promise.all([
      merger(
        home.dir,
        branches.filter((_, i) => i % 2 === 0),
        startAt,
      ),
      merger(
        home.dir,
        branches.filter((_, i) => i % 2 === 1),
        startAt,
      ),
    ]);
    for (const r of results) expect(r.exitCode, r.stderr).toBe(0);
    const after = JSON.parse(await readFile(localPullsPath(home.dir), "utf8")) as LocalPull[];
    expect(after.filter((p) => p.state === "open").map((p) => p.head)).toEqual([]);
    expect(after.every((p) => p.merged === true)).toBe(true);
  }, 180_000);
});

describe("local mode's GitHub (the port over local records)", () => {
  const REPO = { owner: "local", repo: "widgets" };
  const git = (cwd: string, ...args: string[]) =>
    execa("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...args], { cwd });

  async function localGitHub(files: Record<string, string> = {}) {
    const home = await tempHome();
    const repo = await tempGitRepo(files);
    cleanups.push(home.cleanup, repo.cleanup);
    const store = createLocalStateStore({ home: home.dir });
    const github: GitHub = createLocalGitHub({
      home: home.dir,
      repoPath: repo.dir,
      store,
      issueRepository: async () => ({ repository: { path: repo.dir }, base: "main" }),
      clock: () => new Date("2025-06-01T12:00:00Z"),
    });
    return { home: home.dir, repo: repo.dir, store, github };
  }

  it("files an issue as `fleet bd create` records one, numbered after the pull requests, with no task", async () => {
    const { home, repo, store, github } = await localGitHub();
    await mkdir(join(home, "local"), { recursive: true });
    await writeFile(
      localPullsPath(home),
      JSON.stringify([
        { number: 4, head: "fleet/1-x", base: "main", title: "x", body: "", state: "open", url: "x" },
      ]),
    );
    const issue = await github.issues.create(REPO, {
      title: "Add tests for the parser",
      body: "Discovered while working on #1.",
      labels: ["fleet:claude"],
    });
    expect(issue).toMatchObject({ number: 5, id: 5, state: "open", title: "Add tests for the parser" });
    const { doc } = await store.read();
    expect(localIssuesOf(doc)["5"]).toEqual({
      number: 5,
      title: "Add tests for the parser",
      body: "Discovered while working on #1.",
      labels: ["fleet:claude"],
      state: "open",
      createdAt: "2025-06-01T12:00:00.000Z",
      repository: { path: repo },
      base: "main",
    });
    expect(Object.values(doc.tasks)).toEqual([]);
    expect(await github.issues.get(REPO, 5)).toMatchObject({ number: 5, labels: [{ name: "fleet:claude" }] });
    // The next one takes the next number; a listing since a time after both holds neither.
    expect((await github.issues.create(REPO, { title: "Second", body: "" })).number).toBe(6);
    const all = await github.issues.listForRepo(REPO, { state: "all", since: "2025-06-01T00:00:00Z" });
    expect(all.map((i) => i.number)).toEqual([5, 6]);
    expect(await github.issues.listForRepo(REPO, { state: "all", since: "2025-06-02T00:00:00Z" })).toEqual(
      [],
    );
    expect(await github.issues.listForRepo(REPO, { state: "closed" })).toEqual([]);
  });

  it("records sub-issue links, and comments as a bot's", async () => {
    const { github } = await localGitHub();
    const epic = await github.issues.create(REPO, { title: "Epic", body: "" });
    const sub = await github.issues.create(REPO, { title: "Part", body: "" });
    await github.issues.addSubIssue(REPO, epic.number, sub.id);
    await github.issues.addSubIssue(REPO, epic.number, sub.id);
    expect(await github.issues.listSubIssues(REPO, epic.number)).toEqual([
      { id: sub.id, number: sub.number, title: "Part", state: "open" },
    ]);
    await expect(github.issues.addSubIssue(REPO, epic.number, 99)).rejects.toMatchObject({ status: 404 });
    const c = await github.issues.createComment(REPO, epic.number, "first");
    await github.issues.updateComment(REPO, c.id, "edited");
    expect(await github.issues.listComments(REPO, epic.number)).toMatchObject([
      { id: c.id, body: "edited", user: { type: "Bot" } },
    ]);
    expect((await github.issues.getComment(REPO, c.id)).body).toBe("edited");
  });

  it("opens, finds and updates a branch's pull request, with its diff from git", async () => {
    const { repo, github } = await localGitHub();
    await git(repo, "checkout", "-q", "-b", "fleet/1-add");
    await writeFile(join(repo, "ADDED.md"), "one\ntwo\n");
    await git(repo, "add", "ADDED.md");
    await git(repo, "commit", "-q", "-m", "add");
    await git(repo, "checkout", "-q", "main");
    const opened = await github.pulls.create(REPO, {
      head: "fleet/1-add",
      base: "main",
      title: "Add",
      body: "b",
    });
    expect(await github.pulls.listForBranch(REPO, "fleet/1-add", "open")).toEqual([opened]);
    expect(await github.pulls.listForBranch(REPO, "fleet/2-other", "open")).toEqual([]);
    await github.pulls.update(REPO, opened.number, { title: "Add it" });
    expect(await github.pulls.get(REPO, opened.number)).toMatchObject({
      title: "Add it",
      state: "open",
      merged: false,
      head: { ref: "fleet/1-add", repo: { full_name: "local/widgets" } },
      base: { ref: "main" },
      changed_files: 1,
      additions: 2,
      deletions: 0,
    });
    expect(await github.pulls.listReviewComments(REPO, opened.number)).toEqual([]);
  });

  it("reads the repository with git: its default branch, branches, commits and config as committed", async () => {
    const { repo, github } = await localGitHub({ ".github/fleet.yml": "max_concurrent: 2\n" });
    // An uncommitted edit (an agent's, on a checked-out branch) is not what Fleet reads.
    await writeFile(join(repo, ".github/fleet.yml"), "sandbox: none\n");
    expect(await github.repos.getConfig(REPO, ".github/fleet.yml")).toEqual({ max_concurrent: 2 });
    expect(await github.repos.getConfig(REPO, ".github/other.yml")).toBeUndefined();
    expect(await github.repos.get(REPO)).toEqual({ default_branch: "main", clone_url: repo });
    const head = (await git(repo, "rev-parse", "main")).stdout.trim();
    expect(await github.repos.getBranch(REPO, "main")).toEqual({ commit: { sha: head } });
    await expect(github.repos.getBranch(REPO, "nope")).rejects.toMatchObject({ status: 404 });
    expect(await github.repos.listCommits(REPO, "main", 5)).toEqual([
      { sha: head, message: "init", date: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    ]);
    expect(await github.repos.getCollaboratorPermission(REPO, "anyone")).toMatchObject({
      permission: "admin",
    });
  });

  it("refuses what it cannot do, saying so and what to do instead", async () => {
    const { github } = await localGitHub();
    const issue = await github.issues.create(REPO, { title: "T", body: "" });
    const refusals: Array<[string, () => Promise<unknown>, RegExp]> = [
      [
        "issues.update",
        () => github.issues.update(REPO, issue.number, { state: "closed" }),
        /fleet bd close/,
      ],
      [
        "issues.addLabels",
        () => github.issues.addLabels(REPO, issue.number, ["x"]),
        /fleet bd create --labels/,
      ],
      ["issues.removeLabel", () => github.issues.removeLabel(REPO, issue.number, "x"), /--labels/],
      ["issues.listLabels", () => github.issues.listLabels(REPO), /--labels/],
      ["issues.createLabel", () => github.issues.createLabel(REPO, { name: "x", color: "fff" }), /--labels/],
      ["issues.listEvents", () => github.issues.listEvents(REPO, issue.number), /fleet bd show/],
      ["issues.pin", () => github.issues.pin(REPO, issue.number), /fleet tasks/],
      ["contents.get", () => github.contents.get(REPO, "state.json", "fleet/state"), /\$FLEET_HOME/],
      ["git.fastForwardRef", () => github.git.fastForwardRef(REPO, "heads/x", "abc"), /\$FLEET_HOME/],
      [
        "actions.dispatchWorkflow",
        () => github.actions.dispatchWorkflow(REPO, "fleet.yml", { ref: "main", inputs: {} }),
        /fleet run/,
      ],
      [
        "actions.listArtifacts",
        () => github.actions.listArtifacts(REPO, "fleet-fl-1"),
        /fleet task <id> log/,
      ],
      ["listInstallationRepositories", () => github.listInstallationRepositories(), /fleet run/],
      ["token", () => github.token(), /--repo owner\/name/],
    ];
    for (const [operation, call, instead] of refusals) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, operation).toBeInstanceOf(LocalModeRefusal);
      expect(error, operation).toMatchObject({ status: 501, operation });
      expect((error as Error).message, operation).toMatch(
        new RegExp(`^Local mode does not .+ \\(${operation}\\): `),
      );
      expect((error as Error).message, operation).toMatch(instead);
    }
    // Nothing changed on the way.
    expect(await github.issues.get(REPO, issue.number)).toMatchObject({ state: "open", labels: [] });
    expect(github.apiUrl).toBeUndefined();
  });
});
