import { HttpError, notFound, validationFailed } from "../http-error.ts";
import type { Ctx, Router } from "../router.ts";
import type { Repo } from "../state.ts";
import type { World } from "../world.ts";

type Body = Record<string, unknown>;

/** The git database API over the bare repository: refs, commits, trees, blobs. */
export function registerGitRoutes(
  r: Router,
  w: World,
  onRefMoved: (repo: Repo, ref: string, before: string | null, after: string | null) => Promise<void>,
): void {
  const api = (repo: Repo) => `${w.shapes.api}/repos/${repo.fullName}/git`;

  const refJson = async (repo: Repo, ref: string, sha: string, type?: string) => {
    const t = type ?? (await repo.git.objectType(sha)) ?? "commit";
    return {
      ref,
      node_id: w.shapes.nodeId("Ref", ref.length),
      url: `${api(repo)}/${ref}`,
      object: { type: t, sha, url: `${api(repo)}/${t}s/${sha}` },
    };
  };

  const fullRef = (ref: unknown) => {
    const s = String(ref).replace(/^refs\//, "");
    return `refs/${s}`;
  };

  r.on("GET /repos/{owner}/{repo}/git/ref/{ref}", async (ctx) => {
    const repo = w.repo(ctx);
    const ref = fullRef(ctx.params.ref);
    const refs = await repo.git.listRefs(ref);
    const exact = refs.find((x) => x.ref === ref);
    if (!exact) throw notFound();
    return { status: 200, body: await refJson(repo, exact.ref, exact.sha, exact.type) };
  });

  const listMatching = async (ctx: Ctx, prefix: string) => {
    const repo = w.repo(ctx);
    const refs = (await repo.git.listRefs("refs/")).filter((x) => x.ref.startsWith(prefix));
    return { status: 200, body: await Promise.all(refs.map((x) => refJson(repo, x.ref, x.sha, x.type))) };
  };

  r.on("GET /repos/{owner}/{repo}/git/matching-refs/{ref}", (ctx) =>
    listMatching(ctx, fullRef(ctx.params.ref)),
  );

  r.on("POST /repos/{owner}/{repo}/git/refs", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const ref = String(b.ref);
    const sha = String(b.sha);
    if (!ref.startsWith("refs/") || ref.split("/").length < 3)
      throw new HttpError(422, "Reference name must start with 'refs/' and have at least two slashes.");
    return repo.git.exclusive(async () => {
      const type = await repo.git.objectType(sha);
      if (!type) throw new HttpError(422, "Object does not exist");
      if (!(await repo.git.updateRef(ref, sha, ""))) throw new HttpError(422, "Reference already exists");
      await onRefMoved(repo, ref, null, sha);
      return {
        status: 201,
        body: await refJson(repo, ref, sha, type),
        headers: { location: `${api(repo)}/${ref}` },
      };
    });
  });

  r.on("PATCH /repos/{owner}/{repo}/git/refs/{ref}", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const ref = fullRef(ctx.params.ref);
    const b = ctx.body as Body;
    const sha = String(b.sha);
    return repo.git.exclusive(async () => {
      const current = await repo.git.resolveRef(ref);
      if (!current) throw new HttpError(422, "Reference does not exist");
      const type = await repo.git.objectType(sha);
      if (!type) throw new HttpError(422, "Object does not exist");
      if (b.force !== true && current !== sha && !(await repo.git.isAncestor(current, sha))) {
        throw new HttpError(422, "Update is not a fast forward");
      }
      // `current` as the expected old value keeps git's own CAS in force as well.
      if (!(await repo.git.updateRef(ref, sha, current)))
        throw new HttpError(422, "Reference cannot be updated");
      if (current !== sha) await onRefMoved(repo, ref, current, sha);
      return { status: 200, body: await refJson(repo, ref, sha, type) };
    });
  });

  r.on("DELETE /repos/{owner}/{repo}/git/refs/{ref}", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const ref = fullRef(ctx.params.ref);
    return repo.git.exclusive(async () => {
      const current = await repo.git.resolveRef(ref);
      if (!current) throw new HttpError(422, "Reference does not exist");
      await repo.git.deleteRef(ref);
      await onRefMoved(repo, ref, current, null);
      return { status: 204 };
    });
  });

  r.on("GET /repos/{owner}/{repo}/git/commits/{commit_sha}", async (ctx) => {
    const repo = w.repo(ctx);
    const c = await repo.git.readCommit(String(ctx.params.commit_sha));
    if (!c) throw notFound();
    return { status: 200, body: w.shapes.gitCommit(repo, c) };
  });

  r.on("POST /repos/{owner}/{repo}/git/commits", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const tree = String(b.tree);
    if ((await repo.git.objectType(tree)) !== "tree")
      throw validationFailed(
        [{ resource: "Commit", field: "tree", code: "invalid" }],
        "Tree SHA does not exist",
      );
    const parents = (b.parents as string[] | undefined) ?? [];
    for (const p of parents) {
      if ((await repo.git.objectType(p)) !== "commit")
        throw validationFailed(
          [{ resource: "Commit", field: "parents", code: "invalid" }],
          "Parent SHA does not exist or is not a commit object",
        );
    }
    const by = w.actingUser(ctx);
    const person = (v: unknown) => {
      const o = v as { name?: string; email?: string; date?: string } | undefined;
      if (!o?.name || !o.email) return undefined;
      return { name: o.name, email: o.email, date: o.date ? new Date(o.date) : undefined };
    };
    const fallback = { name: by.login, email: `${by.id}+${by.login}@users.noreply.github.com` };
    const author = person(b.author) ?? fallback;
    const sha = await repo.git.commitTree({
      tree,
      parents,
      message: String(b.message),
      author,
      committer: person(b.committer) ?? author,
    });
    const c = (await repo.git.readCommit(sha))!;
    return {
      status: 201,
      body: w.shapes.gitCommit(repo, c),
      headers: { location: `${api(repo)}/commits/${sha}` },
    };
  });

  const treeJson = async (repo: Repo, sha: string, recursive: boolean) => {
    const entries = await repo.git.lsTree(sha, { recursive });
    return {
      sha,
      url: `${api(repo)}/trees/${sha}`,
      tree: entries.map((e) => ({
        path: e.path,
        mode: e.mode,
        type: e.type,
        sha: e.sha,
        ...(e.type === "blob" ? { size: e.size ?? 0 } : {}),
        url: `${api(repo)}/${e.type === "tree" ? "trees" : "blobs"}/${e.sha}`,
      })),
      truncated: false,
    };
  };

  r.on("GET /repos/{owner}/{repo}/git/trees/{tree_sha}", async (ctx) => {
    const repo = w.repo(ctx);
    const want = String(ctx.params.tree_sha);
    const resolved = (await repo.git.resolveCommitish(want)) ?? want;
    const t = await repo.git.objectType(resolved);
    if (t !== "tree" && t !== "commit") throw notFound();
    const treeSha = t === "commit" ? (await repo.git.readCommit(resolved))!.tree : resolved;
    const recursive =
      ctx.params.recursive !== undefined &&
      String(ctx.params.recursive) !== "0" &&
      String(ctx.params.recursive) !== "false";
    return { status: 200, body: await treeJson(repo, treeSha, recursive) };
  });

  r.on("POST /repos/{owner}/{repo}/git/trees", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const base = b.base_tree ? String(b.base_tree) : undefined;
    if (base && (await repo.git.objectType(base)) !== "tree") {
      const c = await repo.git.readCommit(base);
      if (!c)
        throw validationFailed(
          [{ resource: "Tree", field: "base_tree", code: "invalid" }],
          "base_tree is not a valid tree oid",
        );
    }
    const changes: Array<{ path: string; mode: string; sha: string | null }> = [];
    for (const e of b.tree as Array<Record<string, unknown>>) {
      const path = String(e.path);
      const mode = String(e.mode);
      if ("content" in e && typeof e.content === "string") {
        changes.push({ path, mode, sha: await repo.git.writeBlob(e.content) });
      } else if (e.sha === null) {
        changes.push({ path, mode, sha: null });
      } else {
        const sha = String(e.sha);
        if (!(await repo.git.objectType(sha))) {
          throw validationFailed(
            [{ resource: "Tree", field: "tree.sha", code: "invalid" }],
            `tree.sha ${sha} is not a valid ${e.type ?? "blob"}`,
          );
        }
        changes.push({ path, mode, sha });
      }
    }
    const tree = await repo.git.buildTree(base, changes);
    return {
      status: 201,
      body: await treeJson(repo, tree, false),
      headers: { location: `${api(repo)}/trees/${tree}` },
    };
  });

  r.on("GET /repos/{owner}/{repo}/git/blobs/{file_sha}", async (ctx) => {
    const repo = w.repo(ctx);
    const sha = String(ctx.params.file_sha);
    if ((await repo.git.objectType(sha)) !== "blob") throw notFound();
    const data = await repo.git.readBlob(sha);
    return {
      status: 200,
      body: {
        sha,
        node_id: w.shapes.nodeId("Blob", data.length),
        size: data.length,
        url: `${api(repo)}/blobs/${sha}`,
        content: wrap64(data.toString("base64")),
        encoding: "base64",
      },
    };
  });

  r.on("POST /repos/{owner}/{repo}/git/blobs", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const enc = String(b.encoding ?? "utf-8");
    const data =
      enc === "base64" ? Buffer.from(String(b.content), "base64") : Buffer.from(String(b.content), "utf8");
    const sha = await repo.git.writeBlob(data);
    return {
      status: 201,
      body: { url: `${api(repo)}/blobs/${sha}`, sha },
      headers: { location: `${api(repo)}/blobs/${sha}` },
    };
  });
}

/** GitHub wraps base64 content at 60 characters per line. */
export function wrap64(s: string): string {
  return s.replace(/(.{60})/g, "$1\n");
}
