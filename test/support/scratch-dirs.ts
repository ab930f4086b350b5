import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/**
 * `mkdtempSync` in the OS's temporary folder, every folder made removed after the file's tests: the
 * agents' homes and work trees would otherwise pile up run after run. Call at a test file's top level.
 */
export function scratchDirsRemovedAfterAll(): (prefix: string) => string {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return (prefix) => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}
