import { unzipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { tokenOctokit, userOctokit } from "../src/test-helpers.ts";

const FULL = "acme/art";
const owner = "acme";
const repo = "art";

let em: GitHubEmulator;
let runId: number;

beforeAll(async () => {
  em = await startGitHubEmulator();
  await em.createRepo({
    owner,
    name: repo,
    private: true,
    files: { ".github/workflows/fleet-task.yml": "name: fleet-task\non: workflow_dispatch\njobs: {}\n" },
  });
  em.addCollaborator(FULL, "mona", "read");
  const owned = userOctokit(em, "acme");
  await owned.rest.actions.createWorkflowDispatch({
    owner,
    repo,
    workflow_id: "fleet-task.yml",
    ref: "main",
  });
  runId = em.workflowRuns(FULL)[0]!.id;
});
afterAll(async () => {
  await em?.stop();
});

const files = (zip: ArrayBuffer | Uint8Array) =>
  Object.fromEntries(
    Object.entries(unzipSync(new Uint8Array(zip))).map(([k, v]) => [k, Buffer.from(v).toString("utf8")]),
  );

describe("run artifacts", () => {
  it("lists a run's artifacts and downloads one as a zip through GitHub's 302", async () => {
    const up = await em.uploadArtifact(FULL, runId, "fleet-fl-1", {
      "agent.log": "line 1\nline 2\n",
      "PLAN.md": "# Plan\n",
      "nested/KNOWLEDGE.md": "# Knowledge\n",
    });
    expect(up.sizeInBytes).toBeGreaterThan(0);
    await em.uploadArtifact(FULL, runId, "other", { "x.txt": "x" });
    await expect(em.uploadArtifact(FULL, runId, "other", { "y.txt": "y" })).rejects.toThrow(
      /already has an artifact/,
    );
    await expect(em.uploadArtifact(FULL, runId, "bad/name", { "y.txt": "y" })).rejects.toThrow(/not valid/);
    await expect(em.uploadArtifact(FULL, 1, "x", {})).rejects.toThrow(/no workflow run 1/);

    const mona = userOctokit(em, "mona");
    const { data } = await mona.rest.actions.listWorkflowRunArtifacts({ owner, repo, run_id: runId });
    expect(data.total_count).toBe(2);
    expect(data.artifacts.map((a) => a.name)).toEqual(["other", "fleet-fl-1"]);
    const art = data.artifacts[1]!;
    expect(art).toMatchObject({
      id: up.id,
      expired: false,
      size_in_bytes: up.sizeInBytes,
      archive_download_url: `${em.url}/repos/${FULL}/actions/artifacts/${up.id}/zip`,
      workflow_run: { id: runId, head_branch: "main" },
    });
    expect(art.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const byName = await mona.rest.actions.listWorkflowRunArtifacts({
      owner,
      repo,
      run_id: runId,
      name: "other",
    });
    expect(byName.data.artifacts.map((a) => a.id)).not.toContain(up.id);
    const all = await mona.rest.actions.listArtifactsForRepo({ owner, repo, name: "fleet-fl-1" });
    expect(all.data.artifacts.map((a) => a.id)).toEqual([up.id]);
    expect((await mona.rest.actions.getArtifact({ owner, repo, artifact_id: up.id })).data.name).toBe(
      "fleet-fl-1",
    );

    // Octokit follows the redirect, as it does on GitHub.
    const zip = await mona.rest.actions.downloadArtifact({
      owner,
      repo,
      artifact_id: up.id,
      archive_format: "zip",
    });
    expect(files(zip.data as ArrayBuffer)).toEqual({
      "agent.log": "line 1\nline 2\n",
      "PLAN.md": "# Plan\n",
      "nested/KNOWLEDGE.md": "# Knowledge\n",
    });

    // The 302 itself, and a Location that needs no credentials.
    const res = await fetch(`${em.url}/repos/${FULL}/actions/artifacts/${up.id}/zip`, {
      headers: { authorization: `token ${em.userToken("mona")}` },
      redirect: "manual",
    });
    expect(res.status).toBe(302);
    const location = res.headers.get("location")!;
    const blob = await fetch(location);
    expect(blob.status).toBe(200);
    expect(blob.headers.get("content-type")).toBe("application/zip");
    expect(Object.keys(files(await blob.arrayBuffer()))).toContain("agent.log");
    expect((await fetch(location.replace(/[0-9a-f]{8}\.zip$/, "00000000.zip"))).status).toBe(404);
  });

  it("answers 404, 410, 401 and 403 where GitHub does", async () => {
    const mona = userOctokit(em, "mona");
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (e: { status?: number }) => e.status ?? -1,
      );
    const old = await em.uploadArtifact(FULL, runId, "old", { "a.txt": "a" }, { retentionDays: 0 });
    const listed = await mona.rest.actions.getArtifact({ owner, repo, artifact_id: old.id });
    expect(listed.data.expired).toBe(true);
    expect(
      await status(
        mona.rest.actions.downloadArtifact({ owner, repo, artifact_id: old.id, archive_format: "zip" }),
      ),
    ).toBe(410);
    const fresh = em.artifacts(FULL).find((a) => a.name === "fleet-fl-1")!;
    expect(
      await status(
        mona.rest.actions.downloadArtifact({ owner, repo, artifact_id: fresh.id, archive_format: "tar" }),
      ),
    ).toBe(404);
    expect(
      await status(
        mona.rest.actions.downloadArtifact({ owner, repo, artifact_id: 999999, archive_format: "zip" }),
      ),
    ).toBe(404);
    expect(await status(mona.rest.actions.listWorkflowRunArtifacts({ owner, repo, run_id: 999999 }))).toBe(
      404,
    );
    // A private repository hides its artifacts from strangers; a reader may not delete them.
    expect(await status(userOctokit(em, "stranger").rest.actions.listArtifactsForRepo({ owner, repo }))).toBe(
      404,
    );
    expect(await status(mona.rest.actions.deleteArtifact({ owner, repo, artifact_id: fresh.id }))).toBe(403);
    // A GITHUB_TOKEN needs actions: read.
    const noActions = tokenOctokit(em, em.workflowToken(FULL));
    expect(
      await status(noActions.rest.actions.listWorkflowRunArtifacts({ owner, repo, run_id: runId })),
    ).toBe(403);
    const withActions = tokenOctokit(em, em.workflowToken(FULL, { permissions: { actions: "read" } }));
    expect(
      (await withActions.rest.actions.listWorkflowRunArtifacts({ owner, repo, run_id: runId })).data
        .total_count,
    ).toBe(3);
    // The owner deletes one.
    const owned = userOctokit(em, "acme");
    expect((await owned.rest.actions.deleteArtifact({ owner, repo, artifact_id: old.id })).status).toBe(204);
    expect(em.artifacts(FULL).map((a) => a.name)).toEqual(["fleet-fl-1", "other"]);
    expect(em.unimplemented()).toEqual([]);
  });

  it("downloads need a token even on public repositories", async () => {
    await em.createRepo({
      owner,
      name: "pub",
      files: { ".github/workflows/w.yml": "on: workflow_dispatch\njobs: {}\n" },
    });
    await userOctokit(em, "acme").rest.actions.createWorkflowDispatch({
      owner,
      repo: "pub",
      workflow_id: "w.yml",
      ref: "main",
    });
    const run = em.workflowRuns("acme/pub")[0]!;
    const a = await em.uploadArtifact("acme/pub", run.id, "logs", { "agent.log": "hi\n" });
    const anonymous = await fetch(`${em.url}/repos/acme/pub/actions/artifacts/${a.id}/zip`, {
      redirect: "manual",
    });
    expect(anonymous.status).toBe(401);
    const listed = await fetch(`${em.url}/repos/acme/pub/actions/runs/${run.id}/artifacts`);
    expect(listed.status).toBe(200);
  });
});
