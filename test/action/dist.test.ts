import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs script without types
import { buildAction, staleFiles } from "../../scripts/build-action.mjs";

describe("dist/ is the build of the sources (check-clean)", () => {
  let out: string;

  beforeAll(async () => {
    out = await mkdtemp(join(tmpdir(), "fleet-dist-"));
    await buildAction(join(out, "index.js"));
  }, 60_000);

  afterAll(async () => {
    await rm(out, { recursive: true, force: true });
  });

  it("a fresh build matches the committed dist/ (run `npm run build:action` and commit dist/ if not)", async () => {
    expect(await staleFiles(out, "dist")).toEqual([]);
  });

  it("detects a stale dist/", async () => {
    const file = join(out, "index.js");
    await writeFile(file, `${await readFile(file, "utf8")}\n// changed\n`);
    expect(await staleFiles(out, "dist")).toEqual(["index.js"]);
  });
});
