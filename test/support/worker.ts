import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { getAdapter } from "../../src/agents/index.ts";
import { WindowBook } from "../../src/economy/credential-windows.ts";
import { githubOverOctokit, type OctokitClient } from "../../src/github/octokit-port.ts";
import type { GitHub } from "../../src/github/port.ts";
import { createRepoStateStore } from "../../src/state/repo-store.ts";
import {
  type LocalWorker,
  type LocalWorkerOptions,
  startLocalWorker,
} from "../../src/worker/local-worker.ts";
import { botClient } from "./bot-client.ts";
import type { Harness } from "./harness.ts";

export interface TestWorker extends LocalWorker {
  /** The worker's folder (cache clones, worktrees, logs); removed by stop(). */
  workDir: string;
  /** The app's installation client the worker acts with. */
  octokit: OctokitClient;
  /** The same client as the port the worker talks to GitHub through. */
  github: GitHub;
}

/** The credential end-to-end tests hand the agent (the scripted model servers accept any key). */
export const TEST_CREDENTIAL = { name: "anthropic-demo", value: "sk-ant-demo-credential-000000" };

/**
 * A real local worker for the harness's repository, running the real agent CLIs from node_modules
 * against a scripted model server (`modelBaseUrl`): quick polls and heartbeats, no comment throttle.
 */
export async function startTestWorker(
  h: Harness,
  options: Partial<LocalWorkerOptions> & { modelBaseUrl?: string },
): Promise<TestWorker> {
  const bin = resolve("node_modules/.bin");
  if (!process.env.PATH?.split(":").includes(bin)) process.env.PATH = `${bin}:${process.env.PATH}`;
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), "fleet-worker-")));
  const octokit = await botClient(h.gh, h.full);
  const github = options.github ?? githubOverOctokit(octokit);
  const worker = startLocalWorker({
    repo: { owner: h.owner, repo: h.name },
    github,
    store: createRepoStateStore({ github, owner: h.owner, repo: h.name }),
    cloneUrl: h.cloneUrl,
    workDir,
    adapterFor: getAdapter,
    credentialFor: () => TEST_CREDENTIAL,
    // Its own, as if each test worker were a process of its own: test files share a process (vitest.config.ts).
    windowBook: new WindowBook(),
    agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
    pollMs: 200,
    heartbeatMs: 1_000,
    trackerIntervalMs: 0,
    log: (m) => console.error(`[worker] ${m}`),
    ...options,
  });
  return {
    workDir,
    octokit,
    github,
    get name() {
      return worker.name;
    },
    get running() {
      return worker.running;
    },
    poll: () => worker.poll(),
    idle: () => worker.idle(),
    async stop() {
      await worker.stop();
      await rm(workDir, { recursive: true, force: true });
    },
  };
}
