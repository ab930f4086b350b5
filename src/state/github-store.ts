import { createHash } from "node:crypto";
import type { GitHubClient } from "../github/client.ts";
import {
  BEADS_PATH,
  cloneStateDoc,
  type FleetStateDoc,
  parseStateDoc,
  STATE_PATH,
  serializeStateDoc,
} from "./doc.ts";
import { StateConflictError } from "./errors.ts";
import {
  backoffDelay,
  casBackoffDelay,
  DEFAULT_MAX_RETRIES,
  defaultSleep,
  type Mutation,
  type StateSnapshot,
  type StateStore,
  stateBranchRemedy,
  type UpdateOptions,
  type UpdateResult,
  withoutWriteTrailer,
  withSkipCi,
  withWriteTrailer,
} from "./store.ts";

export const DEFAULT_STATE_BRANCH = "fleet/state";

export interface GitHubStateStoreOptions {
  octokit: GitHubClient;
  owner: string;
  repo: string;
  /** Default `fleet/state`. */
  branch?: string;
  clock?: () => Date;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /**
   * "file" (default): a change to one file is one contents-API PUT whose CAS is that file's blob sha.
   * "commit": every write goes through the git data API with a fast-forward-only ref update, so the CAS
   * covers both files (3 requests instead of 1).
   */
  consistency?: "file" | "commit";
  /**
   * Pacing: after a write that took d ms, the next optimistic write from this store waits a random
   * [0, pacing * d) ms if it comes sooner than that. Without it a store writing in a loop on its own
   * cache (1 round trip) starves stores that lost a CAS and must re-read first (2 round trips).
   * Default 3; 0 turns it off. Bursts from one process belong in `createWriteQueue` anyway.
   */
  pacing?: number;
}

/** Requests this store sent, by route; `notModified` counts 304s (free against GitHub's rate limit). */
export interface RequestStats {
  requests: number;
  notModified: number;
  conflicts: number;
  byRoute: Record<string, number>;
}

export interface GitHubStateStore extends StateStore {
  history(limit: number): Promise<Array<{ sha: string; message: string; date: string }>>;
  stats(): RequestStats;
  resetStats(): void;
  /** Forget every cached read (the next read costs full requests). */
  dropCache(): void;
}

interface CachedFile {
  text: string;
  /** Blob sha; undefined when the file does not exist on the branch. */
  sha?: string;
  etag?: string;
}

interface Cache {
  /** Head commit of the branch; "" when the branch does not exist. */
  commit: string;
  tree?: string;
  refEtag?: string;
  /** The files were re-read after `commit`: the head has moved past it (the contents are newer). */
  commitStale?: boolean;
  state: CachedFile;
  beads: CachedFile;
  doc: FleetStateDoc;
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

/**
 * Fleet's repository state on a branch (default `fleet/state`) holding `.fleet/state.json` and
 * `.beads/issues.jsonl`. Reads are conditional (ETag); writes are compare-and-swap, applied first to the
 * cached state (one request when nobody else wrote) and re-applied on fresh state after a conflict.
 */
export function createGitHubStateStore(opts: GitHubStateStoreOptions): GitHubStateStore {
  const { octokit, owner, repo } = opts;
  const branch = opts.branch ?? DEFAULT_STATE_BRANCH;
  const random = opts.random ?? Math.random;
  const sleep = opts.sleep ?? defaultSleep;
  const consistency = opts.consistency ?? "file";
  const where = `${owner}/${repo}@${branch}`;
  const remedy = stateBranchRemedy(branch);

  const pacing = opts.pacing ?? 3;
  let lastWrite = { endedAt: Number.NEGATIVE_INFINITY, tookMs: 0 };
  let stats: RequestStats = { requests: 0, notModified: 0, conflicts: 0, byRoute: {} };
  let cache: Cache | undefined;

  async function call<T = unknown>(
    route: string,
    params: Record<string, unknown>,
  ): Promise<{ status: number; data: T; headers: Record<string, string | undefined> }> {
    for (let attempt = 0; ; attempt++) {
      stats.requests++;
      stats.byRoute[route] = (stats.byRoute[route] ?? 0) + 1;
      try {
        const r = await octokit.request(route, { owner, repo, ...params });
        return r as unknown as { status: number; data: T; headers: Record<string, string | undefined> };
      } catch (error) {
        const status = statusOf(error);
        if (status === 304) stats.notModified++;
        const headers = (error as HttpishError).response?.headers ?? {};
        const retryAfter = Number(headers["retry-after"]);
        // Secondary rate limits answer 403/429 with retry-after; wait as told, a few times at most.
        const limited = status === 429 || (status === 403 && Number.isFinite(retryAfter));
        if (limited && attempt < 3) {
          await sleep(Number.isFinite(retryAfter) ? retryAfter * 1000 : backoffDelay(attempt + 5, random));
          continue;
        }
        throw error;
      }
    }
  }

  async function fetchFile(path: string, prev: CachedFile | undefined): Promise<CachedFile> {
    try {
      const r = await call<{ sha: string; content?: string; encoding?: string; size?: number }>(
        "GET /repos/{owner}/{repo}/contents/{path}",
        { path, ref: branch, headers: prev?.etag ? { "if-none-match": prev.etag } : {} },
      );
      let text: string;
      if (r.data.encoding === "base64" && typeof r.data.content === "string")
        text = decodeBase64(r.data.content);
      else {
        // Over 1 MB the contents API leaves `content` empty; the blob itself comes raw.
        const raw = await call<string>("GET /repos/{owner}/{repo}/git/blobs/{file_sha}", {
          file_sha: r.data.sha,
          headers: { accept: "application/vnd.github.raw+json" },
        });
        const d = raw.data as unknown;
        // Raw text or bytes; a server that ignores the raw media type answers the JSON blob (base64).
        text =
          typeof d === "string"
            ? d
            : d instanceof ArrayBuffer
              ? Buffer.from(d).toString("utf8")
              : decodeBase64((d as { content: string }).content);
      }
      return { text, sha: r.data.sha, etag: r.headers.etag };
    } catch (error) {
      const status = statusOf(error);
      if (status === 304 && prev) return prev;
      if (status === 404) return { text: "" };
      throw error;
    }
  }

  function parse(stateText: string): FleetStateDoc {
    return parseStateDoc(stateText, `${where}:${STATE_PATH}`, remedy);
  }

  /** Brings the cache up to date: one conditional ref read, plus conditional file reads if the head moved. */
  async function refresh(): Promise<Cache> {
    let head: string;
    let refEtag: string | undefined;
    try {
      const r = await call<{ object: { sha: string } }>("GET /repos/{owner}/{repo}/git/ref/{ref}", {
        ref: `heads/${branch}`,
        // A stale commit sha must be learnt again even if the ref did not move since the last read.
        headers: cache?.refEtag && !cache.commitStale ? { "if-none-match": cache.refEtag } : {},
      });
      head = r.data.object.sha;
      refEtag = r.headers.etag;
    } catch (error) {
      const status = statusOf(error);
      if (status === 304 && cache) return cache;
      if (status !== 404) throw error;
      cache = { commit: "", state: { text: "" }, beads: { text: "" }, doc: parse("") };
      return cache;
    }
    if (cache && cache.commit === head && !cache.commitStale) {
      cache.refEtag = refEtag;
      return cache;
    }
    const [state, beads] = await Promise.all([
      fetchFile(STATE_PATH, cache?.state),
      fetchFile(BEADS_PATH, cache?.beads),
    ]);
    // Parse before caching: a corrupt document must fail every read, not just the first.
    const doc = parse(state.text);
    cache = { commit: head, refEtag, state, beads, doc };
    return cache;
  }

  /**
   * After a lost contents-API CAS: re-read just that file (conditionally), not the ref.
   * This keeps a loser's read-to-write window at one round trip, so writers that keep winning with
   * one-request writes on their cache cannot starve it. The commit sha is learnt again from the next write.
   */
  async function refreshFiles(which: "state" | "beads"): Promise<Cache> {
    if (!cache || cache.commit === "") return refresh();
    const before = cache;
    // Per-file CAS: only the file whose write lost is re-read; the other one is re-read by the next full refresh.
    const file = await fetchFile(which === "state" ? STATE_PATH : BEADS_PATH, before[which]);
    if (file.sha === before[which].sha) return before;
    const doc = which === "state" ? parse(file.text) : before.doc;
    cache = { ...before, [which]: file, doc, tree: undefined, commitStale: true };
    return cache;
  }

  const snapshotOf = (c: Cache): StateSnapshot => ({
    doc: cloneStateDoc(c.doc),
    beads: c.beads.text,
    version: c.commit,
  });

  type WriteOutcome = { ok: true } | { ok: false; ambiguous: boolean };

  async function putFile(
    c: Cache,
    which: "state" | "beads",
    text: string,
    message: string,
  ): Promise<WriteOutcome> {
    const path = which === "state" ? STATE_PATH : BEADS_PATH;
    const prev = c[which];
    try {
      const r = await call<{ content: { sha: string }; commit: { sha: string; tree: { sha: string } } }>(
        "PUT /repos/{owner}/{repo}/contents/{path}",
        {
          path,
          // A contents write is a commit on the branch too: it must start no workflow run either.
          message: withSkipCi(message),
          content: encodeBase64(text),
          branch,
          ...(prev.sha ? { sha: prev.sha } : {}),
        },
      );
      const next: Cache = {
        ...c,
        commit: r.data.commit.sha,
        tree: r.data.commit.tree?.sha,
        commitStale: false,
        [which]: { text, sha: r.data.content.sha },
      };
      cache = next;
      return { ok: true };
    } catch (error) {
      const status = statusOf(error);
      // 409: the blob sha is stale; 422: a sha was missing or wrong (the file appeared meanwhile).
      if (status === 409 || status === 422) return { ok: false, ambiguous: false };
      if (status !== undefined && status >= 500) return { ok: false, ambiguous: true };
      throw error;
    }
  }

  const written = (text: string): CachedFile => ({ text, sha: gitBlobSha(text) });

  async function commitFiles(
    c: Cache,
    files: { state?: string; beads?: string },
    message: string,
  ): Promise<WriteOutcome> {
    const orphan = c.commit === "";
    let baseTree = c.tree;
    if (!orphan && baseTree === undefined) {
      const r = await call<{ tree: { sha: string } }>("GET /repos/{owner}/{repo}/git/commits/{commit_sha}", {
        commit_sha: c.commit,
      });
      baseTree = r.data.tree.sha;
    }
    // The first commit holds both files, so the branch always has them; it has no parent, so the state
    // branch never shares history with the code.
    const entries: Array<{ path: string; text: string }> = [];
    if (files.state !== undefined || orphan)
      entries.push({ path: STATE_PATH, text: files.state ?? c.state.text });
    if (files.beads !== undefined || orphan)
      entries.push({ path: BEADS_PATH, text: files.beads ?? c.beads.text });
    try {
      const tree = await call<{ sha: string }>("POST /repos/{owner}/{repo}/git/trees", {
        ...(orphan ? {} : { base_tree: baseTree }),
        tree: entries.map((e) => ({ path: e.path, mode: "100644", type: "blob", content: e.text })),
      });
      const commit = await call<{ sha: string }>("POST /repos/{owner}/{repo}/git/commits", {
        // Commits are content-addressed: two writers producing the same tree on the same parent in the
        // same second would mint the SAME commit, and the loser's ref update would "succeed" as a no-op,
        // losing its write. A unique trailer makes every attempt its own commit, so the CAS stays exact.
        message: withWriteTrailer(message),
        tree: tree.data.sha,
        parents: orphan ? [] : [c.commit],
        ...(opts.clock
          ? {
              author: {
                name: "Fleet",
                email: "fleet@users.noreply.github.com",
                date: opts.clock().toISOString(),
              },
            }
          : {}),
      });
      if (orphan) {
        await call("POST /repos/{owner}/{repo}/git/refs", {
          ref: `refs/heads/${branch}`,
          sha: commit.data.sha,
        });
      } else {
        await call("PATCH /repos/{owner}/{repo}/git/refs/{ref}", {
          ref: `heads/${branch}`,
          sha: commit.data.sha,
          force: false,
        });
      }
      cache = {
        commit: commit.data.sha,
        tree: tree.data.sha,
        refEtag: c.refEtag,
        state: files.state !== undefined || orphan ? written(files.state ?? c.state.text) : c.state,
        beads: files.beads !== undefined || orphan ? written(files.beads ?? c.beads.text) : c.beads,
        doc: c.doc,
      };
      return { ok: true };
    } catch (error) {
      const status = statusOf(error);
      // 422: not a fast-forward (PATCH) or the ref already exists (POST, another writer created it first).
      if (status === 422 || status === 409) return { ok: false, ambiguous: false };
      if (status !== undefined && status >= 500) return { ok: false, ambiguous: true };
      throw error;
    }
  }

  async function update(mutation: Mutation, options: UpdateOptions = {}): Promise<UpdateResult> {
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    let fresh = cache === undefined;
    let c = cache ?? (await refresh());
    let retries = 0;
    for (;;) {
      const out = mutation({ doc: cloneStateDoc(c.doc), beads: c.beads.text });
      if (out === null) {
        // Decided on cached state: make sure it still does not apply before dropping it.
        if (!fresh) {
          c = await refresh();
          fresh = true;
          continue;
        }
        return { applied: false, snapshot: snapshotOf(c), retries };
      }
      const doc = out.doc ?? c.doc;
      const stateText = serializeStateDoc(doc);
      const beadsText = out.beads ?? c.beads.text;
      const stateChanged = stateText !== c.state.text && !(c.state.text === "" && out.doc === undefined);
      const beadsChanged = beadsText !== c.beads.text;
      if (!stateChanged && !beadsChanged && c.commit !== "") {
        return { applied: true, snapshot: snapshotOf(c), retries };
      }
      const sinceLast = performance.now() - lastWrite.endedAt;
      if (retries === 0 && pacing > 0 && sinceLast < pacing * lastWrite.tookMs) {
        await sleep(Math.floor(random() * pacing * lastWrite.tookMs));
      }
      const writeStarted = performance.now();
      let outcome: WriteOutcome;
      const viaGitData = c.commit === "" || consistency === "commit" || (stateChanged && beadsChanged);
      if (viaGitData && c.commitStale) {
        // A git-data commit needs the true parent; learn it before writing.
        c = await refresh();
        fresh = true;
        continue;
      }
      if (viaGitData) {
        outcome = await commitFiles(
          c,
          {
            ...(stateChanged || c.commit === "" ? { state: stateText } : {}),
            ...(beadsChanged ? { beads: beadsText } : {}),
          },
          out.message,
        );
      } else if (stateChanged) outcome = await putFile(c, "state", stateText, out.message);
      else outcome = await putFile(c, "beads", beadsText, out.message);

      const writeEnded = performance.now();
      lastWrite = { endedAt: writeEnded, tookMs: writeEnded - writeStarted };
      if (outcome.ok) {
        cache!.doc = doc;
        return { applied: true, snapshot: snapshotOf(cache!), retries, commit: cache!.commit };
      }
      if (outcome.ambiguous) {
        // The write may have landed before the error: if the branch now holds exactly what we wrote, it did.
        const after = await refresh();
        const landedState = !stateChanged || after.state.text === stateText;
        const landedBeads = !beadsChanged || after.beads.text === beadsText;
        if (landedState && landedBeads)
          return { applied: true, snapshot: snapshotOf(after), retries, commit: after.commit };
      } else stats.conflicts++;
      if (retries >= maxRetries) throw new StateConflictError(where, retries + 1);
      await sleep(casBackoffDelay(retries, random, lastWrite.tookMs));
      retries++;
      if (viaGitData || outcome.ambiguous) {
        c = await refresh();
        fresh = true;
      } else {
        c = await refreshFiles(stateChanged ? "state" : "beads");
        fresh = false;
      }
    }
  }

  return {
    async read() {
      return snapshotOf(await refresh());
    },
    update,
    async history(limit: number) {
      try {
        const r = await call<
          Array<{ sha: string; commit: { message: string; committer: { date: string } | null } }>
        >("GET /repos/{owner}/{repo}/commits", { sha: branch, per_page: Math.min(100, limit) });
        return r.data.map((c) => ({
          sha: c.sha,
          message: withoutWriteTrailer(c.commit.message),
          date: c.commit.committer?.date ?? "",
        }));
      } catch (error) {
        if (statusOf(error) === 404 || statusOf(error) === 409) return [];
        throw error;
      }
    },
    stats: () => structuredClone(stats),
    resetStats() {
      stats = { requests: 0, notModified: 0, conflicts: 0, byRoute: {} };
    },
    dropCache() {
      cache = undefined;
    },
  };
}
