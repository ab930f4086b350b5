import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { type OctokitClient, quietLog } from "../../src/github/octokit-port.ts";
import { botClient } from "./bot-client.ts";
import { FLEET_APP } from "./fleet-app.ts";

/** An emulated GitHub with one repository a task runs against, as the runTask end-to-end tests use it. */
export interface TaskRepository {
  gh: GitHubEmulator;
  repo: Awaited<ReturnType<GitHubEmulator["createRepo"]>>;
  /** The app's installation client, as a worker gets one. */
  bot: OctokitClient;
  /** A maintainer with write access. */
  mona: Octokit;
  /** An empty folder for worktrees and artifacts. */
  workDir: string;
}

/**
 * Starts the emulator with `owner/name` holding `files` and mona as a writer, and makes a work folder
 * named after `workPrefix`; the agent CLIs of this project's devDependencies go first on PATH.
 */
export async function startTaskRepository(o: {
  owner: string;
  name: string;
  files: Record<string, string>;
  workPrefix: string;
}): Promise<TaskRepository> {
  process.env.PATH = `${resolve("node_modules/.bin")}:${process.env.PATH}`;
  const gh = await startGitHubEmulator(FLEET_APP);
  const repo = await gh.createRepo({ owner: o.owner, name: o.name, files: o.files });
  gh.addCollaborator(`${o.owner}/${o.name}`, "mona", "write");
  const bot = await botClient(gh, `${o.owner}/${o.name}`);
  const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona"), log: quietLog });
  const workDir = await mkdtemp(join(tmpdir(), o.workPrefix));
  return { gh, repo, bot, mona, workDir };
}

/** Stops what startTaskRepository started. */
export async function stopTaskRepository(t: Partial<TaskRepository>): Promise<void> {
  await t.gh?.stop();
  if (t.workDir) await rm(t.workDir, { recursive: true, force: true });
}
