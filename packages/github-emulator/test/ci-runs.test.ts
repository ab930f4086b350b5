import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator, type WorkflowRun } from "../src/index.ts";
import { eventually, gitAs, userOctokit } from "../src/test-helpers.ts";

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const schema = createRequire(import.meta.url)("@octokit/webhooks-schemas/schema.json") as {
  definitions: Record<string, unknown>;
};
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...schema, $id: "webhooks" });
const check = (definition: string, payload: unknown) => {
  const validate = ajv.getSchema(`webhooks#/definitions/${definition}`)!;
  return validate(payload) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
};

const FULL = "acme/ci";
const WORKFLOWS = {
  ".github/workflows/ci.yml": "name: CI\non: [push, pull_request]\njobs: {}\n",
  ".github/workflows/main-only.yml": "name: Main\non:\n  push:\n    branches: [main]\njobs: {}\n",
  ".github/workflows/pr-opened.yml":
    "name: PR opened\non:\n  pull_request:\n    types: [opened]\n    branches: [main]\njobs: {}\n",
  ".github/workflows/not-fleet.yml":
    "name: Not fleet\non:\n  push:\n    branches-ignore: ['fleet/**']\njobs: {}\n",
  ".github/workflows/docs.yml": "name: Docs\non:\n  push:\n    paths: ['docs/**']\njobs: {}\n",
  ".github/workflows/release.yml": "name: Release\non:\n  push:\n    tags: ['v*']\njobs: {}\n",
  ".github/workflows/fleet-task.yml":
    "name: fleet-task\non:\n  workflow_dispatch:\n    inputs:\n      task_id:\n        type: string\njobs: {}\n",
  ".github/workflows/named-runs.yml":
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Actions expressions, not JS templates
    "name: Named\nrun-name: task ${{ inputs.task_id }} by ${{ github.actor }} ${{ github.event.inputs.note }}${{ vars.X }}\non:\n  workflow_dispatch:\n    inputs:\n      task_id:\n        type: string\n      note:\n        type: string\njobs: {}\n",
  ".github/workflows/broken.yml": "name: [unclosed\non: push: {\n",
};

let em: GitHubEmulator;
let httpUrl: string;
let cloneUrl: string;
let work: string;
let monaToken: string;

/** Runs created since `before`, as [workflow name, event, branch, actor]. */
const runsSince = (before: number) =>
  em
    .workflowRuns(FULL)
    .slice(before)
    .map((r: WorkflowRun) => [r.name, r.event, r.headBranch, r.actor.login]);

beforeAll(async () => {
  ajv.getSchema("webhooks#/definitions/workflow_run$requested");
  ajv.getSchema("webhooks#/definitions/workflow_job$queued");
  em = await startGitHubEmulator();
  ({ httpUrl, cloneUrl } = await em.createRepo({
    owner: "acme",
    name: "ci",
    files: { "README.md": "# ci\n", ...WORKFLOWS },
  }));
  em.addCollaborator(FULL, "mona", "write");
  monaToken = em.userToken("mona");
  work = await mkdtemp(join(tmpdir(), "fleet-gh-ci-"));
  expect((await gitAs(work, monaToken, ["clone", "-q", httpUrl, "repo"])).code).toBe(0);
});
afterAll(async () => {
  await em?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const repoDir = () => join(work, "repo");
async function commit(file: string, text: string, message: string): Promise<void> {
  await writeFile(join(repoDir(), file), text);
  await gitAs(repoDir(), undefined, ["add", "-A"]);
  expect(
    (await gitAs(repoDir(), undefined, ["commit", "-q", "--cleanup=verbatim", "-m", message])).code,
  ).toBe(0);
}

describe("workflow runs started by pushes and pull requests (CI)", () => {
  it("a push over HTTP starts the push workflows its branch passes, as the pusher, with GitHub's webhooks", async () => {
    const before = em.workflowRuns(FULL).length;
    const hooks = em.deliveries().length;
    await gitAs(repoDir(), undefined, ["checkout", "-q", "-b", "feature/one"]);
    await commit("a.txt", "one\n", "Add a");
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "feature/one"])).code).toBe(0);
    expect(runsSince(before)).toEqual([
      ["CI", "push", "feature/one", "mona"],
      ["Not fleet", "push", "feature/one", "mona"],
    ]);
    const run = em.workflowRuns(FULL)[before]!;
    expect(run).toMatchObject({ status: "queued", conclusion: null, displayTitle: "Add a" });
    expect(run.triggeringActor?.login).toBe("mona");
    // push first, then each run's workflow_run.requested and workflow_job.queued.
    const sent = em.deliveries().slice(hooks);
    expect(sent.map((d) => `${d.event}.${d.action ?? ""}`)).toEqual([
      "push.",
      "workflow_run.requested",
      "workflow_job.queued",
      "workflow_run.requested",
      "workflow_job.queued",
    ]);
    const requested = sent[1]!.payload as {
      workflow_run: { event: string; head_branch: string; head_sha: string; actor: { login: string } };
    };
    expect(check("workflow_run$requested", requested)).toEqual([]);
    expect(check("workflow_job$queued", sent[2]!.payload)).toEqual([]);
    expect(requested.workflow_run).toMatchObject({ event: "push", head_branch: "feature/one" });
    expect(requested.workflow_run.head_sha).toBe(run.headSha);
  });

  it("fleet/* branches pass the branches-ignore workflow by; paths filters look at the changed files", async () => {
    const before = em.workflowRuns(FULL).length;
    await gitAs(repoDir(), undefined, ["checkout", "-q", "-b", "fleet/9-docs"]);
    await commit("docs.md", "x\n", "Touch docs.md at the root");
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "fleet/9-docs"])).code).toBe(0);
    expect(runsSince(before)).toEqual([["CI", "push", "fleet/9-docs", "mona"]]);
  });

  it("the REST contents API moving main starts main's workflows as the caller; docs/** starts Docs", async () => {
    const before = em.workflowRuns(FULL).length;
    const mona = userOctokit(em, "mona");
    await mona.rest.repos.createOrUpdateFileContents({
      owner: "acme",
      repo: "ci",
      path: "docs/guide.md",
      message: "Add a guide",
      content: Buffer.from("# Guide\n").toString("base64"),
    });
    expect(runsSince(before)).toEqual([
      ["CI", "push", "main", "mona"],
      ["Docs", "push", "main", "mona"],
      ["Main", "push", "main", "mona"],
      ["Not fleet", "push", "main", "mona"],
    ]);
  });

  it("a pull request starts pull_request runs when opened, synchronized and reopened, with its number", async () => {
    const mona = userOctokit(em, "mona");
    const before = em.workflowRuns(FULL).length;
    const { data: pr } = await mona.rest.pulls.create({
      owner: "acme",
      repo: "ci",
      head: "feature/one",
      base: "main",
      title: "Feature one",
    });
    expect(runsSince(before)).toEqual([
      ["CI", "pull_request", "feature/one", "mona"],
      ["PR opened", "pull_request", "feature/one", "mona"],
    ]);
    const opened = em.workflowRuns(FULL)[before]!;
    expect(opened).toMatchObject({ pullRequests: [pr.number], displayTitle: "Feature one" });
    const { data: listed } = await mona.rest.actions.getWorkflowRun({
      owner: "acme",
      repo: "ci",
      run_id: opened.id,
    });
    expect(listed.pull_requests?.[0]).toMatchObject({
      number: pr.number,
      head: { ref: "feature/one" },
      base: { ref: "main" },
    });
    const requested = em
      .deliveries()
      .filter(
        (d) =>
          d.event === "workflow_run" &&
          (d.payload as { workflow_run: { id: number } }).workflow_run.id === opened.id,
      );
    expect(check("workflow_run$requested", requested[0]!.payload)).toEqual([]);

    // synchronize: a push to the head branch (PR opened-only workflows stay quiet).
    const sync = em.workflowRuns(FULL).length;
    await gitAs(repoDir(), undefined, ["checkout", "-q", "feature/one"]);
    await commit("b.txt", "two\n", "Add b");
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "feature/one"])).code).toBe(0);
    expect(runsSince(sync)).toEqual([
      ["CI", "push", "feature/one", "mona"],
      ["Not fleet", "push", "feature/one", "mona"],
      ["CI", "pull_request", "feature/one", "mona"],
    ]);

    const reopen = em.workflowRuns(FULL).length;
    await mona.rest.pulls.update({ owner: "acme", repo: "ci", pull_number: pr.number, state: "closed" });
    expect(runsSince(reopen)).toEqual([]);
    await mona.rest.pulls.update({ owner: "acme", repo: "ci", pull_number: pr.number, state: "open" });
    expect(runsSince(reopen)).toEqual([["CI", "pull_request", "feature/one", "mona"]]);
    // The list filters see them too.
    const { data } = await mona.rest.actions.listWorkflowRunsForRepo({
      owner: "acme",
      repo: "ci",
      event: "pull_request",
    });
    expect(data.total_count).toBe(4);
  });

  it("a skip instruction in the head commit skips push and pull_request runs; a skip-checks trailer too", async () => {
    const before = em.workflowRuns(FULL).length;
    const hooks = em.deliveries().length;
    await gitAs(repoDir(), undefined, ["checkout", "-q", "feature/one"]);
    await commit("c.txt", "three\n", "Add c [skip ci]");
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "feature/one"])).code).toBe(0);
    await commit("d.txt", "four\n", "Add d\n\n\nskip-checks: true");
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "feature/one"])).code).toBe(0);
    expect(runsSince(before)).toEqual([]);
    // The events themselves still reach the app.
    expect(
      em
        .deliveries()
        .slice(hooks)
        .map((d) => `${d.event}.${d.action ?? ""}`),
    ).toEqual(["push.", "pull_request.synchronize", "push.", "pull_request.synchronize"]);
  });

  it("tags start tag workflows; deletions and refs that are not branches or tags start none", async () => {
    // (The branch's head says skip-checks: tag a commit without it.)
    await gitAs(repoDir(), undefined, ["checkout", "-q", "-b", "release"]);
    await commit("g.txt", "g\n", "Release 1.0");
    const before = em.workflowRuns(FULL).length;
    await gitAs(repoDir(), undefined, ["tag", "v1.0"]);
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "v1.0"])).code).toBe(0);
    // Path filters are not evaluated for tags, so Docs (paths only) runs too; Main (branches only) does not.
    expect(runsSince(before)).toEqual([
      ["CI", "push", "v1.0", "mona"],
      ["Docs", "push", "v1.0", "mona"],
      ["Release", "push", "v1.0", "mona"],
    ]);
    const after = em.workflowRuns(FULL).length;
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", "HEAD:refs/fleet/state"])).code).toBe(
      0,
    );
    expect((await gitAs(repoDir(), monaToken, ["push", "-q", "origin", ":fleet/9-docs"])).code).toBe(0);
    expect(runsSince(after)).toEqual([]);
  });

  it("a file:// push (the post-receive hook) starts runs as GH_EMULATOR_LOGIN", async () => {
    const before = em.workflowRuns(FULL).length;
    await gitAs(repoDir(), undefined, ["checkout", "-q", "-b", "feature/file"]);
    await commit("e.txt", "five\n", "Add e");
    const pushed = await gitAs(repoDir(), undefined, ["push", "-q", cloneUrl, "feature/file"], {
      GH_EMULATOR_LOGIN: "mona",
    });
    expect(pushed.code).toBe(0);
    await eventually(() => em.workflowRuns(FULL).length >= before + 2, "the file:// push's runs");
    expect(runsSince(before)).toEqual([
      ["CI", "push", "feature/file", "mona"],
      ["Not fleet", "push", "feature/file", "mona"],
    ]);
  });

  it("dispatch works as before: one workflow_dispatch run, and only dispatches reach onWorkflowDispatch", async () => {
    const seen: string[] = [];
    em.onWorkflowDispatch((r) => seen.push(r.event));
    const mona = userOctokit(em, "mona");
    const before = em.workflowRuns(FULL).length;
    await mona.rest.actions.createWorkflowDispatch({
      owner: "acme",
      repo: "ci",
      workflow_id: "fleet-task.yml",
      ref: "main",
      inputs: { task_id: "fl-1" },
    });
    expect(runsSince(before)).toEqual([["fleet-task", "workflow_dispatch", "main", "mona"]]);
    await mona.rest.repos.createOrUpdateFileContents({
      owner: "acme",
      repo: "ci",
      path: "f.txt",
      message: "Add f",
      content: Buffer.from("f\n").toString("base64"),
    });
    expect(seen).toEqual(["workflow_dispatch"]);
    // The dispatched run is listed by its workflow, without the CI runs.
    const { data } = await mona.rest.actions.listWorkflowRuns({
      owner: "acme",
      repo: "ci",
      workflow_id: "fleet-task.yml",
    });
    expect(data.workflow_runs.map((r) => r.event)).toEqual(["workflow_dispatch"]);
    expect(em.unimplemented()).toEqual([]);
  });

  it("a dispatched run's display title is the workflow's run-name with the dispatch's inputs, else the workflow's name", async () => {
    const mona = userOctokit(em, "mona");
    const dispatch = async (workflow_id: string, inputs: Record<string, string>) => {
      const { data } = await mona.request(
        "POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
        {
          owner: "acme",
          repo: "ci",
          workflow_id,
          ref: "main",
          inputs,
          return_run_details: true,
        },
      );
      const id = (data as { workflow_run_id: number }).workflow_run_id;
      return (await mona.rest.actions.getWorkflowRun({ owner: "acme", repo: "ci", run_id: id })).data;
    };
    const named = await dispatch("named-runs.yml", { task_id: "fl-7", note: "first" });
    // An expression the emulator does not evaluate (a configuration variable) reads as empty.
    expect(named.display_title).toBe("task fl-7 by mona first");
    expect(named.triggering_actor?.login).toBe("mona");
    expect(named.event).toBe("workflow_dispatch");
    expect((await dispatch("fleet-task.yml", { task_id: "fl-8" })).display_title).toBe("fleet-task");
  });
});
