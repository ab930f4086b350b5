import { defineConfig } from "vitest/config";

/**
 * Test folders of pure logic, whose files share one module graph per worker (`isolate: false`): a
 * fresh worker per file costs ~0.4 s of CPU, more than most of these files' tests take. Nothing in
 * them may leave state behind for the next file (module mocks, stubbed globals or environment, fake
 * timers, a changed working folder): test/architecture.test.ts checks.
 */
export const PURE_TEST_FOLDERS = ["test/core", "test/render", "test/beads", "test/split"];

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
        test: { name: "pure", include: PURE_TEST_FOLDERS.map((d) => `${d}/**/*.test.ts`), isolate: false },
      },
      {
        extends: true,
        test: {
          name: "parts",
          include: ["test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
          exclude: ["**/node_modules/**", ...PURE_TEST_FOLDERS.map((d) => `${d}/**`)],
        },
      },
    ],
  },
});
