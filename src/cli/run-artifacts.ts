import { unzipSync } from "fflate";
import { runIdOfHolder } from "../core/leases.ts";
import type { Task } from "../core/task.ts";
import type { Artifact, GitHub, RepoRef } from "../github/port.ts";
import { CliError, NotFoundError } from "./errors.ts";

/**
 * A task's artifacts folder as the fleet-task workflow uploads it (actions/upload-artifact of the
 * folder the action names in its `artifacts-dir` output): one artifact per run, named after the task.
 */
export const taskArtifactName = (taskId: string): string => `fleet-${taskId}`;

/** Files bigger than this are not unpacked (an agent log is capped far below it). */
const MAX_FILE_BYTES = 64 * 1024 * 1024;
/** Artifacts bigger than this are not downloaded. */
const MAX_ARTIFACT_BYTES = 256 * 1024 * 1024;

/** Files of one downloaded artifact, by their name in the zip. */
export interface RemoteArtifact {
  runId: number;
  artifact: string;
  files: Map<string, string>;
  /** Where it came from, in words: `Actions run 123, artifact fleet-fl-1`. */
  where: string;
  /** The file by its name: at the zip's root, else anywhere in it. */
  read(name: string): string | undefined;
}

const statusOf = (e: unknown): number | undefined => (e as { status?: number }).status;

/** The Actions runs a task ran in, newest first: its recorded run (id, or its page), then its lease holder's. */
export function taskRunIds(task: Task | undefined): number[] {
  const ids: number[] = [];
  const add = (v: string | undefined) => {
    const n = Number(v);
    if (v && /^\d+$/.test(v) && Number.isSafeInteger(n) && n > 0 && !ids.includes(n)) ids.push(n);
  };
  add(task?.runId);
  add(/\/actions\/runs\/(\d+)/.exec(task?.runUrl ?? "")?.[1]);
  add(runIdOfHolder(task?.lease?.holder));
  return ids;
}

/** What went wrong talking to GitHub, with what to do about it. */
function explain(error: unknown, what: string, repo: RepoRef): Error {
  const status = statusOf(error);
  const full = `${repo.owner}/${repo.repo}`;
  if (status === 401)
    return new CliError(`GitHub refused the token while ${what} of ${full}: set a valid GITHUB_TOKEN.`);
  if (status === 403)
    return new CliError(
      `GitHub refused ${what} of ${full} (403): the token needs read access to the repository's Actions (for a fine-grained token or an app, "Actions: read").`,
    );
  return new CliError(`${what} of ${full} failed: ${(error as Error).message ?? error}`);
}

/**
 * Finds the task's artifact on GitHub and unpacks it in memory: the artifacts of the task's Actions
 * runs (newest first), else any artifact of the repository named after the task. Throws
 * NotFoundError saying what was looked at when there is none.
 */
export async function fetchTaskArtifact(
  github: GitHub,
  repo: RepoRef,
  taskId: string,
  task: Task | undefined,
): Promise<RemoteArtifact> {
  const name = taskArtifactName(taskId);
  const looked: string[] = [];
  const expired: string[] = [];
  const candidates: Artifact[] = [];
  for (const runId of taskRunIds(task)) {
    let list: Artifact[];
    try {
      list = await github.actions.listRunArtifacts(repo, runId);
    } catch (error) {
      if (statusOf(error) === 404) {
        looked.push(`Actions run ${runId} (not found: deleted, or another repository)`);
        continue;
      }
      throw explain(error, `listing the artifacts of run ${runId}`, repo);
    }
    const mine = list.filter((a) => a.name === name);
    const chosen = mine.length ? mine : list.filter((a) => a.name.startsWith("fleet-"));
    looked.push(
      `Actions run ${runId} (${list.length ? `artifacts: ${list.map((a) => a.name).join(", ")}` : "no artifacts"})`,
    );
    candidates.push(...chosen.map((a) => ({ ...a, workflow_run: { id: runId } })));
  }
  if (!candidates.some((a) => !a.expired)) {
    // The state may have lost the run (the task was retried, or cleaned up): look the name up.
    try {
      const named = await github.actions.listArtifacts(repo, name);
      looked.push(`artifacts named ${name} (${named.length})`);
      for (const a of named) if (!candidates.some((c) => c.id === a.id)) candidates.push(a);
    } catch (error) {
      throw explain(error, `listing the artifacts named ${name}`, repo);
    }
  }
  for (const a of candidates) {
    if (a.expired) {
      expired.push(
        `${a.name} of run ${a.workflow_run?.id ?? "?"} expired${a.expires_at ? ` on ${a.expires_at}` : ""}`,
      );
      continue;
    }
    return download(github, repo, a);
  }
  const full = `${repo.owner}/${repo.repo}`;
  throw new NotFoundError(
    `No artifact of task ${taskId} on GitHub (${full}): looked at ${looked.join("; ") || "nothing (the task records no Actions run)"}` +
      `${expired.length ? `; ${expired.join("; ")}` : ""}. The fleet-task workflow uploads the artifact "${name}" when its run ends; a run that is still going or was started by a local worker has none.`,
  );
}

async function download(github: GitHub, repo: RepoRef, a: Artifact): Promise<RemoteArtifact> {
  const where = `Actions run ${a.workflow_run?.id ?? "?"}, artifact ${a.name}`;
  if (a.size_in_bytes > MAX_ARTIFACT_BYTES)
    throw new CliError(
      `${where} is ${a.size_in_bytes} bytes, more than the ${MAX_ARTIFACT_BYTES} this command downloads: fetch it from the run's page.`,
    );
  let zip: Uint8Array;
  try {
    zip = new Uint8Array(await github.actions.downloadArtifact(repo, a.id));
  } catch (error) {
    if (statusOf(error) === 410) throw new NotFoundError(`${where} has expired: GitHub no longer keeps it.`);
    throw explain(error, `downloading ${where}`, repo);
  }
  let entries: Record<string, Uint8Array>;
  try {
    entries = unzipSync(zip, { filter: (f) => !f.name.endsWith("/") && f.originalSize <= MAX_FILE_BYTES });
  } catch (error) {
    throw new CliError(
      `${where} is not a readable zip (${(error as Error).message}): download it from the run's page.`,
    );
  }
  const files = new Map<string, string>();
  for (const [path, bytes] of Object.entries(entries)) files.set(path, Buffer.from(bytes).toString("utf8"));
  return {
    runId: a.workflow_run?.id ?? 0,
    artifact: a.name,
    files,
    where,
    // The artifact's top level only: a file deeper down (an agent's own folder) never stands in for it.
    read: (fileName) => files.get(fileName),
  };
}
