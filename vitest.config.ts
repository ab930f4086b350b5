import { defineConfig } from "vitest/config";

const ALL_TESTS = ["test/**/*.test.ts", "packages/*/test/**/*.test.ts"];

/**
 * Test files that change what a whole process shares (its environment, module mocks, spies, fake
 * timers, its working folder): each runs in a fresh worker of its own. Every other file shares its
 * worker's process and module graph with the files before it (`isolate: false`), as Fleet's modules
 * share a long-running app's or worker's process: a fresh worker per file cost ~0.4 s of CPU for a
 * file of pure logic and ~1 s for one that loads the app (vitest's import time over the suite: 136 s
 * before, ~20 s since). test/architecture.test.ts checks that no file outside this list makes such a change.
 */
export const ISOLATED_TEST_FILES = [
  "packages/github-emulator/test/oidc.test.ts",
  "test/app/delivery-octokit-gc.test.ts",
  "test/app/serve-transport.test.ts",
  "test/process/command-runner.test.ts",
  "test/reliability/octokit-log.test.ts",
  "test/reliability/push-rejected.test.ts",
  "test/security/agent-boundary.test.ts",
  "test/worker/hand-off-poll-race.test.ts",
  "test/worker/run-agent.test.ts",
  "test/worker/run-task.e2e.test.ts",
  "test/worker/sandbox-inherit.test.ts",
  "test/worker/worktree.test.ts",
];

export default defineConfig({
  test: {
    // End-to-end tests start real servers, git and agent CLIs; give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time even on 2 cores: most of an end-to-end test's time is waiting on git,
    // servers and agent CLIs, and one at a time (vitest's default there) takes twice as long.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ALL_TESTS,
          exclude: ["**/node_modules/**", ...ISOLATED_TEST_FILES],
          isolate: false,
        },
      },
      { extends: true, test: { name: "isolated", include: ISOLATED_TEST_FILES } },
    ],
  },
});
