import { notFound } from "../http-error.ts";
import { wrap64 } from "../payloads.ts";
import type { Body, Router } from "../router.ts";
import type { World } from "../world.ts";

/** Git blobs: read as base64, create from utf-8 or base64 (https://docs.github.com/en/rest/git/blobs). */
export function registerGitBlobRoutes(r: Router, w: World): void {
  const url = (fullName: string, sha: string) => `${w.shapes.api}/repos/${fullName}/git/blobs/${sha}`;

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
        url: url(repo.fullName, sha),
        content: wrap64(data.toString("base64")),
        encoding: "base64",
      },
    };
  });

  r.on("POST /repos/{owner}/{repo}/git/blobs", async (ctx) => {
    const repo = w.repo(ctx, "write");
    const b = ctx.body as Body;
    const encoding = String(b.encoding ?? "utf-8") === "base64" ? "base64" : "utf8";
    const sha = await repo.git.writeBlob(Buffer.from(String(b.content), encoding));
    return {
      status: 201,
      body: { url: url(repo.fullName, sha), sha },
      headers: { location: url(repo.fullName, sha) },
    };
  });
}
