import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { gitAs, userOctokit } from "@fleet/github-emulator/test-helpers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createRepoStateStore, type StateTransport } from "../../src/state/repo-store.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

/**
 * The measurement behind src/state/store.ts's `[skip ci]`: how many workflow runs do Fleet's state
 * writes start in a repository whose CI runs `on: [push, pull_request]`?
 */
let em: GitHubEmulator;
let work: string;
const figures: Record<string, number> = {};

beforeAll(async () => {
  em = await startGitHubEmulator(FLEET_APP);
  work = await mkdtemp(join(tmpdir(), "fleet-gh-state-writes-"));
});
afterAll(async () => {
  await em?.stop();
  if (work) await rm(work, { recursive: true, force: true });
  // The figures quoted in src/state/store.ts.
  process.stdout.write(`state writes -> workflow runs: ${JSON.stringify(figures)}\n`);
});

async function ciRepo(name: string) {
  const made = await em.createRepo({
    owner: "acme",
    name,
    files: {
      "README.md": "# r\n",
      ".github/workflows/ci.yml": "name: CI\non: [push, pull_request]\njobs: {}\n",
    },
  });
  em.addCollaborator(made.fullName, "fleet-writer", "write");
  return made;
}

/**
 * Three state writes through Fleet's store on a `fleet/state` made from main (so its commits carry the
 * CI workflow, the case an orphan branch would hide); the runs they started.
 */
async function writeState(name: string, transport: StateTransport, writes: number): Promise<number> {
  const { fullName } = await ciRepo(name);
  const writer = userOctokit(em, "fleet-writer");
  const { data: main } = await writer.rest.git.getRef({ owner: "acme", repo: name, ref: "heads/main" });
  await writer.rest.git.createRef({
    owner: "acme",
    repo: name,
    ref: "refs/heads/fleet/state",
    sha: main.object.sha,
  });
  const before = em.workflowRuns(fullName).length;
  const hooks = em.deliveries().length;
  const store = createRepoStateStore({
    github: githubOverOctokit(writer),
    owner: "acme",
    repo: name,
    transport,
    pacing: 0,
  });
  for (let i = 1; i <= writes; i++) {
    const r = await store.update(({ doc }) => ({
      doc: { ...doc, config: { ...doc.config, max_concurrent: i } },
      message: `config set max_concurrent=${i}`,
    }));
    expect(r.applied).toBe(true);
  }
  // The writes landed on top of main's files, and each was a push the app hears about.
  expect((await store.read()).doc.config.max_concurrent).toBe(writes);
  const tree = await writer.rest.git.getTree({
    owner: "acme",
    repo: name,
    tree_sha: "fleet/state",
    recursive: "1",
  });
  expect(tree.data.tree.map((e) => e.path)).toContain(".github/workflows/ci.yml");
  const pushes = em
    .deliveries()
    .slice(hooks)
    .filter(
      (d) =>
        d.event === "push" &&
        (d.payload as { repository: { full_name: string } }).repository.full_name === fullName,
    );
  expect(pushes.length).toBe(writes);
  return em.workflowRuns(fullName).length - before;
}

describe("Fleet's state writes start no workflow run", () => {
  it("over git and over the REST API, every state commit says [skip ci]", async () => {
    figures.skipCiGit = await writeState("over-git", "git", 3);
    figures.skipCiApi = await writeState("over-api", "api", 3);
    expect(figures).toEqual({ skipCiGit: 0, skipCiApi: 0 });
    const store = createRepoStateStore({
      github: githubOverOctokit(userOctokit(em, "fleet-writer")),
      owner: "acme",
      repo: "over-git",
    });
    // People read the history without the marker.
    expect((await store.history(1))[0]!.message).toBe("config set max_concurrent=3");
  });

  it("compared with plain messages: an orphan branch 0 runs, a branch off main 3, a ref that is not a branch 0", async () => {
    const { httpUrl, fullName } = await ciRepo("compare");
    const token = em.userToken("fleet-writer");
    const dir = join(work, "compare");
    expect((await gitAs(work, token, ["clone", "-q", httpUrl, dir])).code).toBe(0);
    const runs = () => em.workflowRuns(fullName).length;
    const threeWrites = async (ref: string, from: number) => {
      for (let i = from; i < from + 3; i++) {
        await writeFile(join(dir, "state.json"), `{"n":${i}}\n`);
        await gitAs(dir, undefined, ["add", "state.json"]);
        await gitAs(dir, undefined, ["commit", "-q", "-m", `write ${i}`]);
        expect((await gitAs(dir, token, ["push", "-q", "origin", `HEAD:${ref}`])).code).toBe(0);
      }
    };
    // An orphan branch (how Fleet creates fleet/state) holds no .github/workflows: GitHub reads the
    // workflows of the pushed commit, so none runs even without [skip ci].
    await gitAs(dir, undefined, ["checkout", "-q", "--orphan", "orphan-state"]);
    await gitAs(dir, undefined, ["rm", "-q", "-rf", "--cached", "."]);
    await threeWrites("refs/heads/fleet/orphan-state", 1);
    figures.plainMessageOrphanBranch = runs();
    // A state branch made from main (by hand, or by an older tool) carries the workflows: every write runs CI.
    await gitAs(dir, undefined, ["checkout", "-q", "-f", "main"]);
    await gitAs(dir, undefined, ["checkout", "-q", "-b", "state-off-main"]);
    await threeWrites("refs/heads/fleet/state", 4);
    figures.plainMessageBranchOffMain = runs() - figures.plainMessageOrphanBranch;
    // The same commits under a ref that is not a branch or tag: no push workflow runs for it.
    await threeWrites("refs/fleet/state", 7);
    figures.plainMessageNonBranchRef =
      runs() - figures.plainMessageOrphanBranch - figures.plainMessageBranchOffMain;
    expect(figures).toMatchObject({
      plainMessageOrphanBranch: 0,
      plainMessageBranchOffMain: 3,
      plainMessageNonBranchRef: 0,
    });
  });
});
