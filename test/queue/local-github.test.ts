import { readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { afterEach, describe, expect, it } from "vitest";
import { type LocalPull, localPullsPath } from "../../src/queue/local-github.ts";
import { tempHome } from "../cli/cli-helpers.ts";

// pulls.json is read, changed and written again by `fleet run` (a pull request opened), `fleet merge`
// and `fleet bd close` (one closed): separate processes, which must not lose each other's writes.

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A node process that, from `startAt` on, marks the local pull requests of `branches` merged one by one. */
const merger = (home: string, branches: string[], startAt: number) =>
  execa(
    "node",
    [
      "--input-type=module",
      "-e",
      `import { register } from "tsx/esm/api";
register();
const { markLocalPullMerged } = await import(${JSON.stringify(resolve("src/queue/local-github.ts"))});
const [home, branches, startAt] = [process.argv[1], JSON.parse(process.argv[2]), Number(process.argv[3])];
while (Date.now() < startAt) await new Promise((r) => setTimeout(r, 5));
for (const b of branches) if (!(await markLocalPullMerged(home, b))) throw new Error("not open: " + b);`,
      home,
      JSON.stringify(branches),
      String(startAt),
    ],
    { cwd: resolve("."), timeout: 120_000 },
  );

describe("local pull records across processes", () => {
  it("two processes updating pulls.json at once lose none of each other's changes", async () => {
    const home = await tempHome();
    cleanups.push(home.cleanup);
    const n = 120;
    const branches = Array.from({ length: 2 * n }, (_, i) => `fleet/${i + 1}-x`);
    const pulls: LocalPull[] = branches.map((head, i) => ({
      number: i + 1,
      head,
      base: "main",
      title: head,
      body: "",
      state: "open",
      url: head,
    }));
    await execa("mkdir", ["-p", join(home.dir, "local")]);
    await writeFile(localPullsPath(home.dir), JSON.stringify(pulls));
    const startAt = Date.now() + 4000;
    // Interleaved halves, so both processes write throughout.
    const results = await Promise.all([
      merger(
        home.dir,
        branches.filter((_, i) => i % 2 === 0),
        startAt,
      ),
      merger(
        home.dir,
        branches.filter((_, i) => i % 2 === 1),
        startAt,
      ),
    ]);
    for (const r of results) expect(r.exitCode, r.stderr).toBe(0);
    const after = JSON.parse(await readFile(localPullsPath(home.dir), "utf8")) as LocalPull[];
    expect(after.filter((p) => p.state === "open").map((p) => p.head)).toEqual([]);
    expect(after.every((p) => p.merged === true)).toBe(true);
  }, 180_000);
});
