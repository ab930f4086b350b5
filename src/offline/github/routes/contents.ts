import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Router } from "../router.ts";
import type { Repo } from "../state.ts";
import type { World } from "../world.ts";
import { wrap64 } from "./git.ts";

type Body = Record<string, unknown>;

/** The contents API: read files and directories at a ref, write one file as one commit. */
export function registerContentsRoutes(
  r: Router,
  w: World,
  onRefMoved: (repo: Repo, ref: string, before: string | null, after: string | null) => Promise<void>,
): void {
  const entryJson = (repo: Repo, path: string, sha: string, type: string, size: number, ref: string) => {
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
      download_url:
        type === "file" ? `${w.shapes.html}/raw/${repo.fullName}/${ref}/${encodePath(path)}` : null,
      _links: { self: url, git, html },
    };
  };

  r.on("GET /repos/{owner}/{repo}/contents/{path}", async (ctx) => {
    const repo = w.repo(ctx);
    const ref = ctx.params.ref ? String(ctx.params.ref) : repo.defaultBranch;
    const commit = await repo.git.resolveCommitish(ref);
    if (!commit) throw new HttpError(404, `No commit found for the ref ${ref}`);
    const path = String(ctx.params.path ?? "").replace(/^\/+|\/+$/g, "");
    if (path === "") return listDir(repo, commit, "", ref);
    const [entry] = await repo.git.lsTree(commit, { path });
    if (!entry || entry.path !== path) throw notFound();
    if (entry.type === "tree") return listDir(repo, commit, path, ref);
    const data = await repo.git.readBlob(entry.sha);
    const accept = String(ctx.headers.accept ?? "");
    if (accept.includes("application/vnd.github.raw") || accept.includes("application/vnd.github.v3.raw")) {
      return {
        status: 200,
        body: data.toString("utf8"),
        headers: { "content-type": "text/plain; charset=utf-8" },
      };
    }
    // Like GitHub, files over 1 MB come back without content: use the raw media type for them.
    const large = data.length > 1024 * 1024;
    return {
      status: 200,
      body: {
        ...entryJson(repo, path, entry.sha, "file", data.length, ref),
        content: large ? "" : wrap64(data.toString("base64")),
        encoding: large ? "none" : "base64",
      },
    };
  });

  const listDir = async (repo: Repo, commit: string, path: string, ref: string) => {
    const entries = await repo.git.lsTree(path ? `${commit}:${path}` : commit);
    if (entries.length === 0 && path) throw notFound();
    return {
      status: 200,
      body: entries.map((e) =>
        entryJson(
          repo,
          path ? `${path}/${e.path}` : e.path,
          e.sha,
          e.type === "tree" ? "dir" : e.type === "commit" ? "submodule" : "file",
          e.size ?? 0,
          ref,
        ),
      ),
    };
  };

  r.on("PUT /repos/{owner}/{repo}/contents/{path}", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const path = String(ctx.params.path).replace(/^\/+|\/+$/g, "");
    const branch = b.branch ? String(b.branch) : repo.defaultBranch;
    const content = Buffer.from(String(b.content), "base64");
    const by = w.actingUser(ctx);
    return repo.git.exclusive(async () => {
      const ref = `refs/heads/${branch}`;
      const tip = await repo.git.resolveRef(ref);
      // An empty repository accepts a first write to its default branch.
      if (!tip && branch !== repo.defaultBranch) throw new HttpError(404, `Branch ${branch} not found`);
      const existing = tip ? (await repo.git.lsTree(tip, { path }))[0] : undefined;
      const exists = existing && existing.path === path && existing.type === "blob";
      if (exists) {
        if (b.sha === undefined) throw validationFailed([], 'Invalid request.\n\n"sha" wasn\'t supplied.');
        if (String(b.sha) !== existing.sha)
          throw new HttpError(409, `${path} does not match ${String(b.sha)}`);
      } else if (b.sha !== undefined && tip) {
        // GitHub refuses a sha for a file that is not there the same way as a stale one.
        throw new HttpError(409, `${path} does not match ${String(b.sha)}`);
      }
      const blob = await repo.git.writeBlob(content);
      const tree = await repo.git.buildTree(tip, [{ path, mode: "100644", sha: blob }]);
      const person = (v: unknown) => {
        const o = v as { name?: string; email?: string; date?: string } | undefined;
        return o?.name && o.email
          ? { name: o.name, email: o.email, date: o.date ? new Date(o.date) : undefined }
          : undefined;
      };
      const fallback = { name: by.login, email: `${by.id}+${by.login}@users.noreply.github.com` };
      const author = person(b.author) ?? person(b.committer) ?? fallback;
      const sha = await repo.git.commitTree({
        tree,
        parents: tip ? [tip] : [],
        message: String(b.message),
        author,
        committer: person(b.committer) ?? author,
      });
      if (!(await repo.git.updateRef(ref, sha, tip ?? "")))
        throw new HttpError(409, `${path} does not match ${String(b.sha ?? "")}`);
      await onRefMoved(repo, ref, tip ?? null, sha);
      const commit = (await repo.git.readCommit(sha))!;
      return {
        status: exists ? 200 : 201,
        body: {
          content: { ...entryJson(repo, path, blob, "file", content.length, branch) },
          commit: w.shapes.gitCommit(repo, commit),
        },
      };
    });
  });

  r.on("DELETE /repos/{owner}/{repo}/contents/{path}", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const path = String(ctx.params.path).replace(/^\/+|\/+$/g, "");
    const branch = b.branch ? String(b.branch) : repo.defaultBranch;
    const by = w.actingUser(ctx);
    return repo.git.exclusive(async () => {
      const ref = `refs/heads/${branch}`;
      const tip = await repo.git.resolveRef(ref);
      if (!tip) throw new HttpError(404, `Branch ${branch} not found`);
      const [existing] = await repo.git.lsTree(tip, { path });
      if (!existing || existing.path !== path) throw notFound();
      if (String(b.sha) !== existing.sha) throw new HttpError(409, `${path} does not match ${String(b.sha)}`);
      const tree = await repo.git.buildTree(tip, [{ path, mode: "100644", sha: null }]);
      const author = { name: by.login, email: `${by.id}+${by.login}@users.noreply.github.com` };
      const sha = await repo.git.commitTree({ tree, parents: [tip], message: String(b.message), author });
      if (!(await repo.git.updateRef(ref, sha, tip)))
        throw new HttpError(409, `${path} does not match ${String(b.sha)}`);
      await onRefMoved(repo, ref, tip, sha);
      return {
        status: 200,
        body: { content: null, commit: w.shapes.gitCommit(repo, (await repo.git.readCommit(sha))!) },
      };
    });
  });
}

function encodePath(p: string): string {
  return p.split("/").map(encodeURIComponent).join("/");
}
