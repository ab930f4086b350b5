// App memory with 10,000 queued tasks: a child process loads a 10k-task state document (and its beads
// mirror) as the app does (the state store over its default transport, git), runs a scheduling pass,
// and reports its RSS; a second child does the same and reads an empty state, as the baseline. The
// child runs as the app runs under `npm start`: built JavaScript (scripts/build-app.mjs, esbuild) on
// plain node, no TypeScript loader. It imports only what it uses (bench/lib/memory-child.ts): the
// offline GitHub stays in the parent, as GitHub is not in the app's process.
// Run alone: npx tsx bench/memory.ts
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { buildApp } from "../scripts/build-app.mjs";
import { emptyStateDoc, serializeStateDoc } from "../src/core/state-doc.ts";
import { newTask } from "../src/core/task.ts";
import { syncBeads } from "../src/queue/beads-sync.ts";

const run = promisify(execFile);
const CHILD = join(import.meta.dirname, "lib/memory-child.ts");
// Inside the repository, so the child's packages resolve from node_modules (they stay external).
const BUILT = join(import.meta.dirname, "results/tmp/memory-child.mjs");

export async function runMemory(n = 10_000) {
  await mkdir(join(import.meta.dirname, "results/tmp"), { recursive: true });
  await buildApp({ entry: CHILD, outfile: BUILT });
  const gh = await startGitHubEmulator({ appSlug: "fleet", appName: "Fleet" });
  try {
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("octo") });
    const doc = emptyStateDoc();
    const now = "2026-01-01T00:00:00.000Z";
    for (let i = 1; i <= n; i++) {
      const t = newTask({
        id: `fl-${i.toString(36)}`,
        repo: "octo/full",
        issue: i,
        title: `Task ${i}: do something useful`,
        coder: "claude",
        model: "default",
        priority: 2,
        dependsOn: i > 1 && i % 3 === 0 ? [i - 1] : [],
        requestedBy: "mona",
        now,
      });
      doc.tasks[t.id] = t;
    }
    const beads = syncBeads("", Object.values(doc.tasks), Object.values(doc.tasks));
    for (const [name, files] of [
      ["full", { ".fleet/state.json": serializeStateDoc(doc), ".beads/issues.jsonl": beads }],
      ["empty", { ".fleet/state.json": serializeStateDoc(emptyStateDoc()), ".beads/issues.jsonl": "" }],
    ] as const) {
      await gh.createRepo({ owner: "octo", name, files: { "README.md": "x\n" } });
      // The state branch is written the way Fleet writes it: one commit holding both files.
      const head = await mona.rest.git.getRef({ owner: "octo", repo: name, ref: "heads/main" });
      const tree = await mona.rest.git.createTree({
        owner: "octo",
        repo: name,
        tree: Object.entries(files).map(([path, content]) => ({
          path,
          mode: "100644" as const,
          type: "blob" as const,
          content,
        })),
      });
      const commit = await mona.rest.git.createCommit({
        owner: "octo",
        repo: name,
        message: "seed",
        tree: tree.data.sha,
        parents: [],
      });
      void head;
      await mona.rest.git.createRef({
        owner: "octo",
        repo: name,
        ref: "refs/heads/fleet/state",
        sha: commit.data.sha,
      });
    }
    const measure = async (repo: string) =>
      JSON.parse(
        (
          await run(process.execPath, [BUILT, gh.url, gh.userToken("octo"), repo], {
            maxBuffer: 1 << 20,
            // The child collects its garbage before it measures (globalThis.gc), as it always meant to.
            env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --expose-gc`.trim() },
          })
        ).stdout
          .trim()
          .split("\n")
          .at(-1)!,
      );
    const full = await measure("full");
    const empty = await measure("empty");
    return {
      tasks: full.tasks,
      rssMB: full.rssMB,
      heapUsedMB: full.heapUsedMB,
      baselineRssMB: empty.rssMB,
      beadsBytes: full.beadsBytes,
      decisions: full.decisions,
    };
  } finally {
    await gh.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(await runMemory(), null, 2));
