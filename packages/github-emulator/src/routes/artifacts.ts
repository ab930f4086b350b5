import { findRun } from "../actions.ts";
import type { ArtifactStore } from "../artifact-store.ts";
import { HttpError, notFound } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import type { Artifact, Repo } from "../state.ts";
import { paginate, type World } from "../world.ts";

/** Run artifacts: list, get, delete, download (https://docs.github.com/en/rest/actions/artifacts). */
export function registerArtifactRoutes(r: Router, w: World, store: ArtifactStore): void {
  r.on("GET /repos/{owner}/{repo}/actions/runs/{run_id}/artifacts", (ctx) => {
    const { repo, run } = findRun(w, ctx);
    return listArtifacts(w, ctx, repo, run.id);
  });

  r.on("GET /repos/{owner}/{repo}/actions/artifacts", (ctx) => listArtifacts(w, ctx, w.repo(ctx)));

  r.on("GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}", (ctx) => {
    const { repo, artifact } = findArtifact(w, ctx);
    return { status: 200, body: artifactJson(w, repo, artifact) };
  });

  r.on("DELETE /repos/{owner}/{repo}/actions/artifacts/{artifact_id}", (ctx) => {
    const { repo, artifact } = findArtifact(w, ctx);
    w.repo(ctx, "write");
    repo.artifacts.splice(repo.artifacts.indexOf(artifact), 1);
    return { status: 204 };
  });

  // A 302 to a short-lived URL that serves the zip without credentials, as GitHub answers:
  // https://docs.github.com/en/rest/actions/artifacts#download-an-artifact
  r.on("GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}", (ctx) => {
    // Artifacts of public repositories too are for signed-in users only.
    if (ctx.actor.kind === "anonymous") throw new HttpError(401, "Requires authentication");
    const { artifact } = findArtifact(w, ctx);
    if (ctx.params.archive_format !== "zip") throw notFound();
    if (Date.parse(artifact.expiresAt) <= Date.now()) throw new HttpError(410, "Artifact has expired");
    return { status: 302, headers: { location: `${w.shapes.api}${store.signedPath(artifact)}` } };
  });
}

function findArtifact(w: World, ctx: Ctx) {
  const repo = w.repo(ctx);
  const a = repo.artifacts.find((x) => x.id === Number(ctx.params.artifact_id));
  if (!a) throw notFound();
  return { repo, artifact: a };
}

function artifactJson(w: World, repo: Repo, a: Artifact) {
  const run = repo.runs.find((x) => x.id === a.runId);
  const api = `${w.shapes.api}/repos/${repo.fullName}/actions/artifacts/${a.id}`;
  return {
    id: a.id,
    node_id: w.shapes.nodeId("Artifact", a.id),
    name: a.name,
    size_in_bytes: a.zip.length,
    url: api,
    archive_download_url: `${api}/zip`,
    expired: Date.parse(a.expiresAt) <= Date.now(),
    created_at: a.createdAt,
    updated_at: a.createdAt,
    expires_at: a.expiresAt,
    digest: a.digest,
    workflow_run: run
      ? {
          id: run.id,
          repository_id: repo.id,
          head_repository_id: repo.id,
          head_branch: run.headBranch,
          head_sha: run.headSha,
        }
      : null,
  };
}

function listArtifacts(w: World, ctx: Ctx, repo: Repo, runId?: number) {
  const name = ctx.params.name === undefined ? undefined : String(ctx.params.name);
  let list = repo.artifacts.filter(
    (a) => (runId === undefined || a.runId === runId) && (name === undefined || a.name === name),
  );
  // Newest first, as GitHub lists them; `direction=asc` (run artifacts only) turns that around.
  list = [...list].reverse();
  if (ctx.params.direction === "asc") list.reverse();
  const page = paginate(ctx, w.shapes.api, list);
  return {
    ...page,
    body: { total_count: list.length, artifacts: page.body.map((a) => artifactJson(w, repo, a)) },
  };
}
