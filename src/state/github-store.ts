import { createHash } from "node:crypto";
import { BEADS_PATH, STATE_PATH } from "../core/state-doc.ts";
import type { GitHub, RepoRef, Tagged } from "../github/port.ts";
import * as cas from "./cas-store.ts";
import { backoffDelay, defaultSleep, type HistoryEntry, type StateStore } from "./store.ts";

export { DEFAULT_STATE_BRANCH } from "./store.ts";

export interface GitHubStateStoreOptions extends cas.BranchStoreOptions {
  github: GitHub;
  owner: string;
  repo: string;
  /**
   * "file" (default): a change to one file is one contents-API PUT whose CAS is that file's blob sha.
   * "commit": every write goes through the git data API with a fast-forward-only ref update, so the CAS
   * covers both files (3 requests instead of 1).
   */
  consistency?: "file" | "commit";
}

/** Requests this store sent, by route; `notModified` counts 304s (free against GitHub's rate limit). */
export interface RequestStats {
  requests: number;
  notModified: number;
  conflicts: number;
  byRoute: Record<string, number>;
}

export interface GitHubStateStore extends StateStore {
  history(limit: number): Promise<HistoryEntry[]>;
  stats(): RequestStats;
  resetStats(): void;
  /** Forget every cached read (the next read costs full requests). */
  dropCache(): void;
}

/** A file's blob sha (undefined when the file does not exist on the branch) and its ETag. */
interface Blob {
  sha?: string;
  etag?: string;
}

interface RestHead extends cas.Head {
  tree?: string;
  refEtag?: string;
  /**
   * `version` and the files are not one commit's: the files were re-read after it (they are newer), or a
   * one-file write's commit may hold another writer's newer other file. Read again before a two-file write.
   */
  commitStale?: boolean;
  blobs: Record<keyof cas.StateFiles, Blob>;
}

interface HttpishError {
  status?: number;
  response?: { headers?: Record<string, string | undefined>; data?: unknown };
  message?: string;
}
const statusOf = (error: unknown): number | undefined => (error as HttpishError)?.status;

/** Git's blob id for a text, the same sha GitHub reports for the file. */
export const gitBlobSha = (text: string): string => {
  const body = Buffer.from(text, "utf8");
  return createHash("sha1").update(`blob ${body.length}\0`).update(body).digest("hex");
};

const decodeBase64 = (s: string): string => Buffer.from(s, "base64").toString("utf8");
const encodeBase64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
const PATHS: Record<keyof cas.StateFiles, string> = { state: STATE_PATH, beads: BEADS_PATH };
const emptyHead = (): RestHead => ({ version: "", state: "", beads: "", blobs: { state: {}, beads: {} } });
/** A file we wrote: its sha is known, its ETag is not. */
const written = (text: string): Blob => ({ sha: gitBlobSha(text) });

/** What a failed write means: 409/422 a lost CAS (`conflict`), a 5xx a lost answer; anything else throws. */
function failedWrite(error: unknown, conflict: cas.WriteOutcome<RestHead>): cas.WriteOutcome<RestHead> {
  const status = statusOf(error);
  if (status === 409 || status === 422) return conflict;
  if (status !== undefined && status >= 500) return { kind: "unknown" };
  throw error;
}

/**
 * The state branch over the REST contents and git data API. Reads are conditional (ETag); a change to
 * one file is one contents-API PUT whose CAS is the file's blob sha, a change to both one commit with a
 * fast-forward-only ref update.
 */
class RestTransport implements cas.CasTransport<RestHead> {
  readonly place: cas.StatePlace;
  stats = { requests: 0, notModified: 0, byRoute: {} as Record<string, number> };
  private readonly branch: string;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly repo: RepoRef;
  private readonly opts: GitHubStateStoreOptions;

  constructor(opts: GitHubStateStoreOptions) {
    this.opts = opts;
    const place = cas.branchPlace(`${opts.owner}/${opts.repo}`, opts.branch);
    this.repo = { owner: opts.owner, repo: opts.repo };
    this.place = place;
    this.branch = place.branch;
    this.random = opts.random ?? Math.random;
    this.sleep = opts.sleep ?? defaultSleep;
  }

  /** One request (counted under its REST route), retried as a secondary rate limit says. */
  private async call<T>(route: string, request: (github: GitHub, repo: RepoRef) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      this.stats.requests++;
      this.stats.byRoute[route] = (this.stats.byRoute[route] ?? 0) + 1;
      try {
        return await request(this.opts.github, this.repo);
      } catch (error) {
        const status = statusOf(error);
        if (status === 304) this.stats.notModified++;
        const headers = (error as HttpishError).response?.headers ?? {};
        const retryAfter = Number(headers["retry-after"]);
        // Secondary rate limits answer 403/429 with retry-after; wait as told, a few times at most.
        const limited = status === 429 || (status === 403 && Number.isFinite(retryAfter));
        if (limited && attempt < 3) {
          await this.sleep(
            Number.isFinite(retryAfter) ? retryAfter * 1000 : backoffDelay(attempt + 5, this.random),
          );
          continue;
        }
        throw error;
      }
    }
  }

  /** A file at the branch head, read conditionally on its last ETag; `prev` again on a 304. */
  private async fetchFile(
    which: keyof cas.StateFiles,
    prev: RestHead | undefined,
  ): Promise<{ text: string; blob: Blob }> {
    const etag = prev?.blobs[which].etag;
    try {
      const r = await this.call("GET /repos/{owner}/{repo}/contents/{path}", (gh, repo) =>
        gh.contents.get(repo, PATHS[which], this.branch, etag),
      );
      const text =
        r.data.encoding === "base64" && typeof r.data.content === "string"
          ? decodeBase64(r.data.content)
          : await this.call("GET /repos/{owner}/{repo}/git/blobs/{file_sha}", (gh, repo) =>
              // Over 1 MB the contents API leaves `content` empty; the blob itself comes raw.
              gh.git.getBlobText(repo, r.data.sha),
            );
      return { text, blob: { sha: r.data.sha, etag: r.etag } };
    } catch (error) {
      const status = statusOf(error);
      if (status === 304 && prev) return { text: prev[which], blob: prev.blobs[which] };
      if (status === 404) return { text: "", blob: {} };
      throw error;
    }
  }

  /**
   * One conditional ref read, plus conditional file reads if the head moved. With `only` (after a lost
   * per-file CAS): just that file, not the ref, so a loser's read-to-write window stays one round trip
   * and writers that keep winning with one-request writes on their cache cannot starve it; the commit
   * sha is learnt again from the next write.
   */
  async read(prev: RestHead | undefined, only?: keyof cas.StateFiles): Promise<RestHead> {
    if (only && prev && prev.version !== "") return this.readFile(prev, only);
    // A stale commit sha must be learnt again even if the ref did not move since the last read.
    const etag = prev?.refEtag && !prev.commitStale ? prev.refEtag : undefined;
    let r: Tagged<{ sha: string }>;
    try {
      r = await this.call("GET /repos/{owner}/{repo}/git/ref/{ref}", (gh, repo) =>
        gh.git.getRef(repo, `heads/${this.branch}`, etag),
      );
    } catch (error) {
      const status = statusOf(error);
      if (status === 304 && prev) return prev;
      if (status !== 404) throw error;
      return emptyHead();
    }
    const version = r.data.sha;
    const refEtag = r.etag;
    if (prev && prev.version === version && !prev.commitStale) return { ...prev, refEtag };
    const [state, beads] = await Promise.all([this.fetchFile("state", prev), this.fetchFile("beads", prev)]);
    return {
      version,
      refEtag,
      state: state.text,
      beads: beads.text,
      blobs: { state: state.blob, beads: beads.blob },
    };
  }

  private async readFile(prev: RestHead, which: keyof cas.StateFiles): Promise<RestHead> {
    const file = await this.fetchFile(which, prev);
    if (file.blob.sha === prev.blobs[which].sha) return prev;
    const blobs = { ...prev.blobs, [which]: file.blob };
    return { ...prev, [which]: file.text, blobs, tree: undefined, commitStale: true };
  }

  async write(
    base: RestHead,
    files: Partial<cas.StateFiles>,
    message: cas.CommitMessage,
  ): Promise<cas.WriteOutcome<RestHead>> {
    const both = files.state !== undefined && files.beads !== undefined;
    const viaGitData = base.version === "" || this.opts.consistency === "commit" || both;
    // A git-data commit needs the true parent; learn it before writing.
    if (viaGitData && base.commitStale) return { kind: "stale" };
    if (viaGitData) return this.commitFiles(base, files, message);
    const which = files.state !== undefined ? "state" : "beads";
    return this.putFile(base, which, files[which]!, message);
  }

  private async putFile(
    base: RestHead,
    which: keyof cas.StateFiles,
    text: string,
    message: cas.CommitMessage,
  ): Promise<cas.WriteOutcome<RestHead>> {
    const sha = base.blobs[which].sha;
    try {
      const r = await this.call("PUT /repos/{owner}/{repo}/contents/{path}", (gh, repo) =>
        gh.contents.put(repo, {
          path: PATHS[which],
          // A contents write is a commit on the branch too: it must start no workflow run either.
          message: message.skipCi,
          content: encodeBase64(text),
          branch: this.branch,
          ...(sha ? { sha } : {}),
        }),
      );
      const blobs = { ...base.blobs, [which]: { sha: r.blobSha } };
      // The file's own sha is the compare-and-swap: another writer's commit that changed only the other
      // file may have come between the base and this one, and the new commit holds its version of that
      // file, not the cache's. Unless the commit's parent is the base, the head is not one commit's
      // files: a two-file write then reads first (else it would put the cache's older file back).
      const onBase = r.parentShas?.length === 1 && r.parentShas[0] === base.version;
      const head = { ...base, version: r.commitSha, tree: r.treeSha, commitStale: !onBase };
      return { kind: "written", head: { ...head, [which]: text, blobs } };
    } catch (error) {
      // 409: the blob sha is stale; 422: a sha was missing or wrong (the file appeared meanwhile).
      return failedWrite(error, { kind: "conflict", file: which });
    }
  }

  /** Both files (or the first commit) in one commit, then a fast-forward-only ref update: the CAS. */
  private async commitFiles(
    base: RestHead,
    files: Partial<cas.StateFiles>,
    message: cas.CommitMessage,
  ): Promise<cas.WriteOutcome<RestHead>> {
    const orphan = base.version === "";
    let baseTree = base.tree;
    if (!orphan && baseTree === undefined) {
      const version = base.version;
      baseTree = await this.call("GET /repos/{owner}/{repo}/git/commits/{commit_sha}", (gh, repo) =>
        gh.git.getCommitTree(repo, version),
      );
    }
    const entries = (["state", "beads"] as const).filter((k) => files[k] !== undefined);
    try {
      const tree = await this.call("POST /repos/{owner}/{repo}/git/trees", (gh, repo) =>
        gh.git.createTree(repo, {
          ...(orphan ? {} : { baseTree }),
          files: entries.map((k) => ({ path: PATHS[k], content: files[k]! })),
        }),
      );
      const commit = await this.newCommit(tree, orphan ? [] : [base.version], message);
      // The first commit has no parent, so the state branch never shares history with the code.
      if (orphan)
        await this.call("POST /repos/{owner}/{repo}/git/refs", (gh, repo) =>
          gh.git.createRef(repo, `refs/heads/${this.branch}`, commit),
        );
      else
        await this.call("PATCH /repos/{owner}/{repo}/git/refs/{ref}", (gh, repo) =>
          gh.git.fastForwardRef(repo, `heads/${this.branch}`, commit),
        );
      const state = files.state ?? base.state;
      const beads = files.beads ?? base.beads;
      const blobs = {
        state: files.state !== undefined ? written(state) : base.blobs.state,
        beads: files.beads !== undefined ? written(beads) : base.blobs.beads,
      };
      return {
        kind: "written",
        head: { version: commit, tree, refEtag: base.refEtag, state, beads, blobs },
      };
    } catch (error) {
      // 422: not a fast-forward (PATCH) or the ref already exists (POST, another writer created it first).
      return failedWrite(error, { kind: "conflict" });
    }
  }

  private async newCommit(tree: string, parents: string[], message: cas.CommitMessage): Promise<string> {
    const { clock } = this.opts;
    return this.call("POST /repos/{owner}/{repo}/git/commits", (gh, repo) =>
      gh.git.createCommit(repo, {
        // Commits are content-addressed: two writers producing the same tree on the same parent in the
        // same second would mint the SAME commit, and the loser's ref update would "succeed" as a no-op,
        // losing its write. A unique trailer makes every attempt its own commit, so the CAS stays exact.
        message: message.unique,
        tree,
        parents,
        ...(clock
          ? {
              author: { name: "Fleet", email: "fleet@users.noreply.github.com", date: clock().toISOString() },
            }
          : {}),
      }),
    );
  }

  async history(limit: number): Promise<HistoryEntry[]> {
    try {
      return await this.call("GET /repos/{owner}/{repo}/commits", (gh, repo) =>
        gh.repos.listCommits(repo, this.branch, limit),
      );
    } catch (error) {
      if (statusOf(error) === 404 || statusOf(error) === 409) return [];
      throw error;
    }
  }
}

/**
 * Fleet's repository state on a branch (default `fleet/state`) holding `.fleet/state.json` and
 * `.beads/issues.jsonl`, over the REST API. Reads are conditional (ETag); writes are compare-and-swap,
 * applied first to the cached state (one request when nobody else wrote) and re-applied on fresh state
 * after a conflict.
 */
export function createGitHubStateStore(opts: GitHubStateStoreOptions): GitHubStateStore {
  const transport = new RestTransport(opts);
  const store = cas.createCasStore(transport, opts);
  return {
    ...store,
    stats: () => structuredClone({ ...transport.stats, conflicts: store.conflicts() }),
    resetStats() {
      transport.stats = { requests: 0, notModified: 0, byRoute: {} };
      store.resetConflicts();
    },
  };
}
