import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { gitAs, tokenOctokit, userOctokit } from "../src/test-helpers.ts";

const FULL = "acme/wt";
const owner = "acme";
const repo = "wt";

let em: GitHubEmulator;
let httpUrl: string;
let work: string;

beforeAll(async () => {
  em = await startGitHubEmulator();
  ({ httpUrl } = await em.createRepo({
    owner,
    name: repo,
    files: {
      "README.md": "# wt\n",
      ".github/workflows/ci.yml": "name: CI\non: [push, pull_request]\njobs: {}\n",
      ".github/workflows/fleet-task.yml": "name: fleet-task\non: workflow_dispatch\njobs: {}\n",
      ".github/workflows/deploy.yml":
        "name: Deploy\non:\n  repository_dispatch:\n    types: [deploy]\njobs: {}\n",
    },
  }));
  await em.createRepo({ owner, name: "other", files: { "README.md": "# other\n" } });
  em.addCollaborator(FULL, "mona", "write");
  work = await mkdtemp(join(tmpdir(), "fleet-gh-wt-"));
});
afterAll(async () => {
  await em?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const status = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: { status?: number }) => e.status ?? -1,
  );

describe("a workflow's GITHUB_TOKEN", () => {
  it("acts as github-actions[bot] (a Bot) on its own repository only, within its permissions", async () => {
    const gh = tokenOctokit(em, em.workflowToken(FULL));
    const { data: issue } = await gh.rest.issues.create({ owner, repo, title: "From a workflow" });
    expect(issue.user).toMatchObject({ login: "github-actions[bot]", type: "Bot" });
    const opened = em.deliveries().find((d) => d.event === "issues" && d.action === "opened")!;
    expect((opened.payload as { sender: { login: string; type: string } }).sender).toMatchObject({
      login: "github-actions[bot]",
      type: "Bot",
    });
    // The installation's other repository is not there for it.
    expect(await status(gh.rest.repos.get({ owner, repo: "other" }))).toBe(404);

    const readOnly = tokenOctokit(em, em.workflowToken(FULL, { permissions: { contents: "read" } }));
    const refused = await readOnly.rest.issues.create({ owner, repo, title: "no" }).catch((e) => e);
    expect(refused.status).toBe(403);
    expect(refused.response.data.message).toBe("Resource not accessible by integration");
    expect((await readOnly.rest.repos.getContent({ owner, repo, path: "README.md" })).status).toBe(200);
    expect(
      await status(
        readOnly.rest.repos.createOrUpdateFileContents({
          owner,
          repo,
          path: "x.txt",
          message: "x",
          content: Buffer.from("x").toString("base64"),
        }),
      ),
    ).toBe(403);
    // Actions needs its own permission (not in the default set).
    expect(await status(gh.rest.actions.listWorkflowRunsForRepo({ owner, repo }))).toBe(403);
  });

  it("may not open a pull request until the repository allows it; then the PR is the bot's and starts no run", async () => {
    const mona = userOctokit(em, "mona");
    const gh = tokenOctokit(em, em.workflowToken(FULL));
    const { data: main } = await mona.rest.git.getRef({ owner, repo, ref: "heads/main" });
    await mona.rest.git.createRef({ owner, repo, ref: "refs/heads/fleet/1-change", sha: main.object.sha });
    const before = em.workflowRuns(FULL).length;
    // A commit made with the GITHUB_TOKEN: push webhook yes, workflow run no.
    const hooks = em.deliveries().length;
    await gh.rest.repos.createOrUpdateFileContents({
      owner,
      repo,
      path: "change.txt",
      branch: "fleet/1-change",
      message: "A change from a workflow",
      content: Buffer.from("change\n").toString("base64"),
    });
    expect(em.workflowRuns(FULL).length).toBe(before);
    const push = em
      .deliveries()
      .slice(hooks)
      .find((d) => d.event === "push")!;
    expect((push.payload as { sender: { login: string } }).sender.login).toBe("github-actions[bot]");

    const create = () =>
      gh.rest.pulls.create({ owner, repo, head: "fleet/1-change", base: "main", title: "Change" });
    const refused = await create().catch((e) => e);
    expect(refused.status).toBe(403);
    expect(refused.response.data.message).toBe(
      "GitHub Actions is not permitted to create or approve pull requests.",
    );
    expect(em.pulls(FULL)).toEqual([]);

    // The repository's default settings, then an admin allows it.
    const owned = userOctokit(em, "acme");
    const settings = () =>
      owned.request("GET /repos/{owner}/{repo}/actions/permissions/workflow", { owner, repo });
    expect((await settings()).data).toEqual({
      default_workflow_permissions: "read",
      can_approve_pull_request_reviews: false,
    });
    const put = (body: Record<string, unknown>, as = owned) =>
      as.request("PUT /repos/{owner}/{repo}/actions/permissions/workflow", { owner, repo, ...body });
    // Only admins may change it: not a writer, not Fleet's app, not a GITHUB_TOKEN; bad values are refused.
    expect(await status(put({ can_approve_pull_request_reviews: true }, mona))).toBe(403);
    const app = tokenOctokit(em, await installationToken(em));
    expect(await status(put({ can_approve_pull_request_reviews: true }, app))).toBe(403);
    expect(await status(put({ can_approve_pull_request_reviews: true }, gh))).toBe(403);
    expect(await status(put({ default_workflow_permissions: "admin" }))).toBe(422);
    expect(await status(put({ can_approve_pull_request_reviews: "yes" }))).toBe(422);
    expect(
      (await put({ can_approve_pull_request_reviews: true, default_workflow_permissions: "write" })).status,
    ).toBe(204);
    expect((await settings()).data).toEqual({
      default_workflow_permissions: "write",
      can_approve_pull_request_reviews: true,
    });

    const runs = em.workflowRuns(FULL).length;
    const { data: pr } = await create();
    expect(pr.user).toMatchObject({ login: "github-actions[bot]", type: "Bot" });
    // pull_request.opened still reaches apps; the repository's CI does not start.
    expect(em.deliveries().some((d) => d.event === "pull_request" && d.action === "opened")).toBe(true);
    expect(em.workflowRuns(FULL).length).toBe(runs);
    // The same PR opened by a person's token starts CI (the identity Fleet's app must use).
    await gh.rest.pulls.update({ owner, repo, pull_number: pr.number, state: "closed" });
    const { data: again } = await mona.rest.pulls.create({
      owner,
      repo,
      head: "fleet/1-change",
      base: "main",
      title: "Change, by a person",
    });
    expect(
      em
        .workflowRuns(FULL)
        .slice(runs)
        .map((r) => [r.event, r.actor.login, r.pullRequests]),
    ).toEqual([["pull_request", "mona", [again.number]]]);
  });

  it("pushes over git smart HTTP with contents: write, start no run, and cannot push read-only", async () => {
    const token = em.workflowToken(FULL);
    const dir = join(work, "clone");
    expect((await gitAs(work, token, ["clone", "-q", httpUrl, dir])).code).toBe(0);
    await gitAs(dir, undefined, ["checkout", "-q", "-b", "fleet/2-push"]);
    await writeFile(join(dir, "pushed.txt"), "pushed\n");
    await gitAs(dir, undefined, ["add", "."]);
    await gitAs(dir, undefined, ["commit", "-q", "-m", "Pushed by a workflow"]);
    const before = em.workflowRuns(FULL).length;
    const hooks = em.deliveries().length;
    expect((await gitAs(dir, token, ["push", "-q", "origin", "fleet/2-push"])).code).toBe(0);
    const push = em
      .deliveries()
      .slice(hooks)
      .find((d) => d.event === "push")!;
    expect((push.payload as { pusher: { name: string } }).pusher.name).toBe("github-actions[bot]");
    expect(em.workflowRuns(FULL).length).toBe(before);

    // The same commit pushed by a person starts CI.
    const mona = em.userToken("mona");
    expect((await gitAs(dir, mona, ["push", "-q", "origin", "fleet/2-push:fleet/2-person"])).code).toBe(0);
    expect(
      em
        .workflowRuns(FULL)
        .slice(before)
        .map((r) => [r.event, r.headBranch, r.actor.login]),
    ).toEqual([["push", "fleet/2-person", "mona"]]);

    const readOnly = em.workflowToken(FULL, { permissions: { contents: "read" } });
    const refused = await gitAs(dir, readOnly, ["push", "-q", "origin", "fleet/2-push:fleet/2-read"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/403|denied/);
  });

  it("workflow_dispatch and repository_dispatch are the exceptions: a GITHUB_TOKEN starts their runs", async () => {
    const gh = tokenOctokit(
      em,
      em.workflowToken(FULL, { permissions: { actions: "write", contents: "read" } }),
    );
    const before = em.workflowRuns(FULL).length;
    await gh.rest.actions.createWorkflowDispatch({ owner, repo, workflow_id: "fleet-task.yml", ref: "main" });
    expect(
      em
        .workflowRuns(FULL)
        .slice(before)
        .map((r) => [r.event, r.actor.login]),
    ).toEqual([["workflow_dispatch", "github-actions[bot]"]]);
    // repository_dispatch too (it takes contents: write), for the workflows whose types name it.
    const sender = tokenOctokit(em, em.workflowToken(FULL));
    const next = em.workflowRuns(FULL).length;
    await sender.rest.repos.createDispatchEvent({ owner, repo, event_type: "other" });
    await sender.rest.repos.createDispatchEvent({
      owner,
      repo,
      event_type: "deploy",
      client_payload: { v: 1 },
    });
    expect(
      em
        .workflowRuns(FULL)
        .slice(next)
        .map((r) => [r.name, r.event, r.headBranch, r.actor.login]),
    ).toEqual([["Deploy", "repository_dispatch", "main", "github-actions[bot]"]]);
    const hook = em
      .deliveries()
      .filter((d) => d.event === "repository_dispatch")
      .at(-1)!;
    expect(hook.payload).toMatchObject({ action: "deploy", branch: "main", client_payload: { v: 1 } });
    const reader = tokenOctokit(em, em.workflowToken(FULL, { permissions: { contents: "read" } }));
    expect(await status(reader.rest.repos.createDispatchEvent({ owner, repo, event_type: "deploy" }))).toBe(
      403,
    );
    expect(em.unimplemented()).toEqual([]);
  });
});

/** The Fleet app's installation token (JWT -> access token), as the app holds it. */
async function installationToken(emulator: GitHubEmulator): Promise<string> {
  const { createAppAuth } = await import("@octokit/auth-app");
  const auth = createAppAuth({
    appId: emulator.appId,
    privateKey: emulator.privateKey,
    installationId: emulator.installationId(FULL),
    request: (await import("@octokit/request")).request.defaults({ baseUrl: emulator.url }),
  });
  return ((await auth({ type: "installation" })) as { token: string }).token;
}
