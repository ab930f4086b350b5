// The servers the state-store tests run against: the offline emulator (@fleet/github-emulator, a real bare
// git repository behind it) with the REST transport, and an in-memory repository with the memory
// transport (src/state/memory-store.ts). Same tests, same assertions.

import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { createMemoryRepo, createMemoryStateStore } from "../../src/state/memory-store.ts";
import type { StateStore } from "../../src/state/store.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

/** Options every store takes; `consistency` only means something to the REST transport. */
export interface StoreTuning {
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  pacing?: number;
  consistency?: "file" | "commit";
}

export type TestStore = StateStore & {
  history(limit: number): Promise<Array<{ sha: string; message: string; date: string }>>;
  stats(): { conflicts: number };
};

export interface Backend {
  name: string;
  /** A state store on this backend's repository (the REST transport on the emulator). */
  store(tuning?: StoreTuning): TestStore;
  head(branch: string): Promise<string | undefined>;
  parents(sha: string): Promise<string[]>;
  files(branch: string): Promise<Record<string, string>>;
  /** A commit made outside the API (a person pushing), on top of the branch. */
  push(branch: string, files: Record<string, string>, message: string): Promise<string>;
  /** Message of the branch's newest commit, read from git itself (the emulator has no list-commits route). */
  lastMessage(branch: string): Promise<string>;
  /** Commits reachable from the branch. */
  commitCount(branch: string): Promise<number>;
  close(): Promise<void>;
}

export const OWNER = "octo";
export const REPO = "widgets";

export async function startMemoryBackend(): Promise<Backend> {
  const repo = createMemoryRepo();
  return {
    name: "memory",
    store: (tuning = {}) => createMemoryStateStore({ repo, ...tuning }),
    head: async (b) => repo.refs.get(b),
    parents: async (sha) => repo.commits.get(sha)?.parents ?? [],
    files: async (b) => repo.files(b),
    push: async (b, files, message) => repo.push(b, files, message),
    lastMessage: async (b) => repo.commits.get(repo.refs.get(b)!)!.message,
    commitCount: async (b) => {
      let n = 0;
      for (let sha = repo.refs.get(b); sha; sha = repo.commits.get(sha)!.parents[0]) n++;
      return n;
    },
    close: async () => {},
  };
}

export async function startEmulatorBackend(): Promise<
  Backend & { emulator: GitHubEmulator; octokit(): Octokit }
> {
  const emulator = await startGitHubEmulator(FLEET_APP);
  const repo = await emulator.createRepo({ owner: OWNER, name: REPO, files: { "README.md": "# widgets\n" } });
  emulator.addCollaborator(repo.fullName, "maintainer", "write");
  const token = emulator.userToken("maintainer");
  const git = async (args: string[], input?: string) =>
    (
      await execa("git", ["-C", repo.gitDir, ...args], {
        input,
        env: {
          GIT_CONFIG_NOSYSTEM: "1",
          GIT_CONFIG_GLOBAL: "/dev/null",
          GIT_AUTHOR_NAME: "t",
          GIT_AUTHOR_EMAIL: "t@t",
          GIT_COMMITTER_NAME: "t",
          GIT_COMMITTER_EMAIL: "t@t",
        },
      })
    ).stdout.trim();
  const head = async (b: string) => {
    const r = await execa("git", ["-C", repo.gitDir, "rev-parse", "--verify", "-q", `refs/heads/${b}`], {
      reject: false,
    });
    return r.exitCode === 0 ? r.stdout.trim() : undefined;
  };
  return {
    name: "emulator",
    emulator,
    octokit: () => new Octokit({ baseUrl: emulator.url, auth: token }),
    store: (tuning = {}) =>
      createGitHubStateStore({
        github: githubOverOctokit(new Octokit({ baseUrl: emulator.url, auth: token })),
        owner: OWNER,
        repo: REPO,
        ...tuning,
      }),
    head,
    parents: async (sha) => {
      const line = await git(["rev-list", "--parents", "-n", "1", sha]);
      return line.split(" ").slice(1);
    },
    files: async (b) => {
      const names = (await git(["ls-tree", "-r", "--name-only", `refs/heads/${b}`]))
        .split("\n")
        .filter(Boolean);
      const out: Record<string, string> = {};
      for (const n of names) {
        const r = await execa("git", ["-C", repo.gitDir, "cat-file", "blob", `refs/heads/${b}:${n}`], {
          stripFinalNewline: false,
        });
        out[n] = r.stdout;
      }
      return out;
    },
    push: async (b, files, message) => {
      const entries: string[] = [];
      // mktree takes a flat listing; nest one level of directories, which is all the state branch has.
      const dirs = new Map<string, string[]>();
      for (const [path, text] of Object.entries(files)) {
        const blob = await git(["hash-object", "-w", "--stdin"], text);
        const [dir, name] = path.includes("/")
          ? [path.slice(0, path.lastIndexOf("/")), path.slice(path.lastIndexOf("/") + 1)]
          : ["", path];
        if (dir === "") entries.push(`100644 blob ${blob}\t${name}`);
        else dirs.set(dir, [...(dirs.get(dir) ?? []), `100644 blob ${blob}\t${name}`]);
      }
      for (const [dir, lines] of dirs)
        entries.push(`040000 tree ${await git(["mktree"], `${lines.join("\n")}\n`)}\t${dir}`);
      const tree = await git(["mktree"], `${entries.join("\n")}\n`);
      const parent = await head(b);
      const sha = await git(["commit-tree", tree, ...(parent ? ["-p", parent] : []), "-m", message]);
      await git(["update-ref", `refs/heads/${b}`, sha]);
      return sha;
    },
    lastMessage: async (b) => {
      const r = await execa("git", ["-C", repo.gitDir, "log", "-1", "--format=%B", `refs/heads/${b}`]);
      return r.stdout.trim();
    },
    commitCount: async (b) => Number(await git(["rev-list", "--count", `refs/heads/${b}`])),
    close: () => emulator.stop(),
  };
}
