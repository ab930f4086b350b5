import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
    // End-to-end tests start real servers, git and agent CLIs; give them room on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time even on 2 cores: most of an end-to-end test's time is waiting on git,
    // servers and agent CLIs, and one at a time (vitest's default there) takes twice as long.
    maxWorkers: 2,
  },
});
