import { createHash, randomBytes } from "node:crypto";
import { zipSync } from "fflate";
import type { Artifact, Repo, WorkflowRun } from "./state.ts";

/** How long a download URL from the artifact API works (GitHub: 1 minute). */
const DOWNLOAD_URL_TTL_MS = 60_000;
/** upload-artifact's default retention (GitHub: 90 days unless the repository sets less). */
const DEFAULT_RETENTION_DAYS = 90;

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * Run artifacts: what actions/upload-artifact stores (one zip each), and the short-lived signed URLs
 * the download API hands out, served without credentials as GitHub serves them from blob storage.
 */
export class ArtifactStore {
  /** Signed download URLs handed out by the API: token -> artifact and expiry. */
  private readonly downloads = new Map<string, { artifact: Artifact; expiresAt: number }>();
  private readonly nextId: () => number;

  constructor(nextId: () => number) {
    this.nextId = nextId;
  }

  /** What actions/upload-artifact does on a runner: one zip of `files`, named, on the run. */
  upload(
    repo: Repo,
    run: WorkflowRun,
    name: string,
    files: Record<string, string | Uint8Array>,
    retentionDays = DEFAULT_RETENTION_DAYS,
  ): Artifact {
    if (!name || /[":<>|*?\r\n\\/]/.test(name))
      throw new Error(
        `artifact name "${name}" is not valid: upload-artifact refuses " : < > | * ? \\ / and line breaks`,
      );
    if (repo.artifacts.some((a) => a.runId === run.id && a.name === name))
      throw new Error(
        `run ${run.id} already has an artifact named "${name}" (upload-artifact v4 names are unique per run)`,
      );
    const entries: Record<string, Uint8Array> = {};
    for (const [path, content] of Object.entries(files))
      entries[path] = typeof content === "string" ? new TextEncoder().encode(content) : content;
    const zip = Buffer.from(zipSync(entries));
    const now = Date.now();
    const artifact: Artifact = {
      id: this.nextId(),
      name,
      runId: run.id,
      zip,
      digest: `sha256:${createHash("sha256").update(zip).digest("hex")}`,
      createdAt: iso(now),
      expiresAt: iso(now + retentionDays * 86_400_000),
    };
    repo.artifacts.push(artifact);
    return artifact;
  }

  /** A new signed URL path for the artifact's zip (`/_emulator/artifacts/<token>.zip`), valid for a minute. */
  signedPath(artifact: Artifact): string {
    const token = randomBytes(16).toString("hex");
    this.downloads.set(token, { artifact, expiresAt: Date.now() + DOWNLOAD_URL_TTL_MS });
    return `/_emulator/artifacts/${token}.zip`;
  }

  /** The zip behind a signed download URL, while the URL is valid; undefined for any other path. */
  download(
    path: string,
  ): { status: number; body: Buffer | string; headers: Record<string, string> } | undefined {
    const m = /^\/_emulator\/artifacts\/([0-9a-f]+)\.zip$/.exec(path);
    if (!m) return undefined;
    const entry = this.downloads.get(m[1]!);
    const text = { "content-type": "text/plain; charset=utf-8" };
    if (!entry) return { status: 404, body: "The specified blob does not exist.\n", headers: text };
    if (entry.expiresAt < Date.now()) {
      this.downloads.delete(m[1]!);
      return {
        status: 403,
        body: "This download URL has expired: ask the API for a new one.\n",
        headers: text,
      };
    }
    return {
      status: 200,
      body: entry.artifact.zip,
      headers: {
        "content-type": "application/zip",
        "content-disposition": `attachment; filename=${entry.artifact.name}.zip`,
      },
    };
  }
}
