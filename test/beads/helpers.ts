import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const FIXTURES = fileURLToPath(new URL("../fixtures/beads/", import.meta.url));

/** A beads fixture copied verbatim from steveyegge/beads (see test/fixtures/beads/SOURCES.txt). */
export const readFixture = (path: string): string => readFileSync(`${FIXTURES}${path}`, "utf8");

export const FIXTURE_FILES = {
  dec2025: "2025-12-01-64ef220/issues.jsonl",
  tombstone: "2026-01-21-1f8a6bf/issues.jsonl",
  head: "head-fbcee6c/issues.jsonl",
  deletions: "v0.29.0-c9eeecf/deletions.jsonl",
} as const;
