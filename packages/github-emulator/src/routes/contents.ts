import { identityFrom, noreplyIdentity } from "../authors.ts";
import { HttpError, notFound, validationFailed } from "../http-error.ts";
import { wrap64 } from "../payloads.ts";
import type { OnRefMoved } from "../ref-events.ts";
import type { Body, Ctx, Reply, Router } from "../router.ts";
import { checkRulesets } from "../rulesets.ts";
import type { Repo } from "../state.ts";
import type { World } from "../world.ts";

/**
 * Repository contents: read files and directories at a ref, write or delete one file as one commit
 * (https://docs.github.com/en/rest/repos/contents).
 */
export function registerContentsRoutes(r: Router, w: World, onRefMoved: OnRefMoved): void {
  r.on("GET /repos/{owner}/{repo}/contents/{path}", (ctx) => getContents(w, ctx));
  r.on("PUT /repos/{owner}/{repo}/contents/{path}", (ctx) => putContents(w, ctx, onRefMoved));
  r.on("DELETE /repos/{owner}/{repo}/contents/{path}", (ctx) => deleteContents(w, ctx, onRefMoved));
}

const DOCS = "https://docs.github.com/rest/repos/contents";

const encodePath = (p: string): string => p.split("/").map(encodeURIComponent).join("/");
const trimSlashes = (p: unknown): string => String(p ?? "").replace(/^\/+|\/+$/g, "");

function entryJson(w: World, repo: Repo, path: string, sha: string, type: string, size: number, ref: string) {
  const api = `${w.shapes.api}/repos/${repo.fullName}`;
  const url = `${api}/contents/${encodePath(path)}?ref=${encodeURIComponent(ref)}`;
  const html = `${w.shapes.html}/${repo.fullName}/${type === "dir" ? "tree" : "blob"}/${ref}/${encodePath(path)}`;
  const git = `${api}/git/${type === "dir" ? "trees" : "blobs"}/${sha}`;
  return {
    type,
    size,
    name: path.split("/").pop()!,
    path,
    sha,
    url,
    git_url: git,
    html_url: html,
    download_url: type === "file" ? `${w.shapes.html}/raw/${repo.fullName}/${ref}/${encodePath(path)}` : null,
    _links: { self: url, git, html },
  };
}

async function listDir(w: World, repo: Repo, commit: string, path: string, ref: string): Promise<Reply> {
  const entries = await repo.git.lsTree(path ? `${commit}:${path}` : commit);
  if (entries.length === 0 && path) throw notFound();
  return {
    status: 200,
    body: entries.map((e) =>
      entryJson(
        w,
        repo,
        path ? `${path}/${e.path}` : e.path,
        e.sha,
        e.type === "tree" ? "dir" : e.type === "commit" ? "submodule" : "file",
        e.size ?? 0,
        ref,
      ),
    ),
  };
}

async function getContents(w: World, ctx: Ctx): Promise<Reply> {
  const repo = w.repo(ctx);
  const ref = ctx.params.ref ? String(ctx.params.ref) : repo.defaultBranch;
  const commit = await repo.git.resolveCommitish(ref);
  if (!commit) throw new HttpError(404, `No commit found for the ref ${ref}`);
  const path = trimSlashes(ctx.params.path);
  if (path === "") return listDir(w, repo, commit, "", ref);
  const [entry] = await repo.git.lsTree(commit, { path });
  if (!entry || entry.path !== path) throw notFound();
  if (entry.type === "tree") return listDir(w, repo, commit, path, ref);
  const data = await repo.git.readBlob(entry.sha);
  const accept = String(ctx.headers.accept ?? "");
  if (accept.includes("application/vnd.github.raw") || accept.includes("application/vnd.github.v3.raw"))
    return {
      status: 200,
      body: data.toString("utf8"),
      headers: { "content-type": "text/plain; charset=utf-8" },
    };
  // Like GitHub, files over 1 MB come back without content: use the raw media type for them.
  const large = data.length > 1024 * 1024;
  return {
    status: 200,
    body: {
      ...entryJson(w, repo, path, entry.sha, "file", data.length, ref),
      content: large ? "" : wrap64(data.toString("base64")),
      encoding: large ? "none" : "base64",
    },
  };
}

const stale = (path: string, sha: unknown) =>
  new HttpError(409, `${path} does not match ${String(sha ?? "")}`);

/** A contents PUT's check of `sha` against the file it replaces (GitHub's optimistic concurrency). */
function checkReplacedSha(
  path: string,
  sha: unknown,
  existing: { sha: string } | undefined,
  tip: string | undefined,
): void {
  if (existing) {
    if (sha === undefined) throw validationFailed([], 'Invalid request.\n\n"sha" wasn\'t supplied.');
    if (String(sha) !== existing.sha) throw stale(path, sha);
  } else if (sha !== undefined && tip) {
    // GitHub refuses a sha for a file that is not there the same way as a stale one.
    throw stale(path, sha);
  }
}

function putContents(w: World, ctx: Ctx, onRefMoved: OnRefMoved): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const b = ctx.body as Body;
  const path = trimSlashes(ctx.params.path);
  const branch = b.branch ? String(b.branch) : repo.defaultBranch;
  const content = Buffer.from(String(b.content), "base64");
  const by = w.actingUser(ctx);
  return repo.git.exclusive(async () => {
    const ref = `refs/heads/${branch}`;
    const tip = await repo.git.resolveRef(ref);
    // An empty repository accepts a first write to its default branch.
    if (!tip && branch !== repo.defaultBranch) throw new HttpError(404, `Branch ${branch} not found`);
    if (tip) checkRulesets(repo, by.login, ref, `${DOCS}#create-or-update-file-contents`);
    const found = tip ? (await repo.git.lsTree(tip, { path }))[0] : undefined;
    const existing = found && found.path === path && found.type === "blob" ? found : undefined;
    checkReplacedSha(path, b.sha, existing, tip);
    const blob = await repo.git.writeBlob(content);
    const tree = await repo.git.buildTree(tip, [{ path, mode: "100644", sha: blob }]);
    const author = identityFrom(b.author) ?? identityFrom(b.committer) ?? noreplyIdentity(by);
    const sha = await repo.git.commitTree({
      tree,
      parents: tip ? [tip] : [],
      message: String(b.message),
      author,
      committer: identityFrom(b.committer) ?? author,
    });
    if (!(await repo.git.updateRef(ref, sha, tip ?? ""))) throw stale(path, b.sha);
    await onRefMoved(repo, ref, tip ?? null, sha);
    const commit = (await repo.git.readCommit(sha))!;
    return {
      status: existing ? 200 : 201,
      body: {
        content: { ...entryJson(w, repo, path, blob, "file", content.length, branch) },
        commit: w.shapes.gitCommit(repo, commit),
      },
    };
  });
}

function deleteContents(w: World, ctx: Ctx, onRefMoved: OnRefMoved): Promise<Reply> {
  const repo = w.repo(ctx, "write");
  const b = ctx.body as Body;
  const path = trimSlashes(ctx.params.path);
  const branch = b.branch ? String(b.branch) : repo.defaultBranch;
  const by = w.actingUser(ctx);
  return repo.git.exclusive(async () => {
    const ref = `refs/heads/${branch}`;
    const tip = await repo.git.resolveRef(ref);
    if (!tip) throw new HttpError(404, `Branch ${branch} not found`);
    checkRulesets(repo, by.login, ref, `${DOCS}#delete-a-file`);
    const [existing] = await repo.git.lsTree(tip, { path });
    if (!existing || existing.path !== path) throw notFound();
    if (String(b.sha) !== existing.sha) throw stale(path, b.sha);
    const tree = await repo.git.buildTree(tip, [{ path, mode: "100644", sha: null }]);
    const sha = await repo.git.commitTree({
      tree,
      parents: [tip],
      message: String(b.message),
      author: noreplyIdentity(by),
    });
    if (!(await repo.git.updateRef(ref, sha, tip))) throw stale(path, b.sha);
    await onRefMoved(repo, ref, tip, sha);
    return {
      status: 200,
      body: { content: null, commit: w.shapes.gitCommit(repo, (await repo.git.readCommit(sha))!) },
    };
  });
}
