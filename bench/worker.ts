// Worker overheads: dispatch-to-spawn on a 10,000-file repository (cache clone sync + worktree + prompt +
// spawn until the agent's first output line), agent-output parsing throughput (LineSplitter + Claude
// adapter parseLine over a large stream built from real fixture lines), and N scripted agents at once.
// Run alone: npx tsx bench/worker.ts
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { claudeAdapter } from "../src/agents/claude.ts";
import type { AgentAdapter } from "../src/agents/types.ts";
import { taskBranchName } from "../src/core/branch.ts";
import { buildPrompt } from "../src/worker/prompt.ts";
import { LineSplitter, runAgent } from "../src/worker/sandbox/run-agent.ts";
import { addWorktree, removeWorktree } from "../src/worker/workspace/worktree.ts";
import { round } from "./lib/route-timer.ts";

const git = promisify(execFile);
const FIXTURES = fileURLToPath(new URL("../test/fixtures/agents", import.meta.url));

/** An adapter whose binary replays Claude's real stream-json lines (from the fixtures) and exits. */
function replayAdapter(script: string, lines: string, repeat: number, delayMs: number): AgentAdapter {
  return {
    ...claudeAdapter,
    binary: process.execPath,
    command: () => ({
      file: process.execPath,
      args: [script, lines, String(repeat), String(delayMs)],
      env: {},
      stdin: "ignore",
    }),
  };
}

const REPLAY = `const fs=require("fs");const [,,file,rep,delay]=process.argv;const text=fs.readFileSync(file,"utf8");
let i=0;const n=Number(rep);const tick=()=>{process.stdout.write(text);if(++i<n)setTimeout(tick,Number(delay));};tick();`;

export async function runWorkerBench(opts: { files?: number; agents?: number } = {}) {
  const files = opts.files ?? 10_000;
  const agents = opts.agents ?? 8;
  const dir = await mkdtemp(join(tmpdir(), "fleet-bench-worker-"));
  try {
    // A bare "origin" with `files` files in 100 folders, built with git plumbing.
    const src = join(dir, "src");
    await git("git", ["init", "-q", "-b", "main", src]);
    const { mkdir } = await import("node:fs/promises");
    for (let d = 0; d < 100; d++) {
      await mkdir(join(src, `pkg${d}`), { recursive: true });
      await Promise.all(
        Array.from({ length: files / 100 }, (_, f) =>
          writeFile(join(src, `pkg${d}`, `file${f}.ts`), `export const v${d}_${f} = ${d * f};\n`),
        ),
      );
    }
    const env = {
      ...process.env,
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_AUTHOR_NAME: "b",
      GIT_AUTHOR_EMAIL: "b@x",
      GIT_COMMITTER_NAME: "b",
      GIT_COMMITTER_EMAIL: "b@x",
    };
    await git("git", ["-C", src, "add", "-A"], { env });
    await git("git", ["-C", src, "commit", "-q", "-m", "seed"], { env });
    const origin = join(dir, "origin.git");
    await git("git", ["clone", "-q", "--bare", src, origin]);
    const cloneUrl = `file://${origin}`;
    const workDir = join(dir, "work");

    const fixture = await readFile(join(FIXTURES, "claude-2.1.197-scripted-write.ndjson"), "utf8");
    const linesFile = join(dir, "lines.ndjson");
    await writeFile(linesFile, fixture.endsWith("\n") ? fixture : `${fixture}\n`);
    const script = join(dir, "replay.cjs");
    await writeFile(script, REPLAY);

    const measure = async (taskId: string) => {
      const t0 = performance.now();
      const branch = taskBranchName(7, `Task ${taskId}`);
      const wt = await addWorktree(workDir, { repo: "octo/big", cloneUrl }, taskId, branch);
      const tWorktree = performance.now();
      const prompt = buildPrompt({
        repo: "octo/big",
        issue: 7,
        title: "t",
        body: "b",
        comments: [],
        notesDir: join(dir, "notes"),
        branch,
        phase: "work",
      });
      let firstLine = 0;
      const result = await runAgent(
        replayAdapter(script, linesFile, 1, 0),
        { prompt, model: "m", phase: "work", cwd: wt.path },
        {
          timeoutMs: 60_000,
          stallMs: 30_000,
          onLine: () => {
            firstLine ||= performance.now();
          },
        },
      );
      if (result.reason !== "completed" && result.reason !== "failed")
        throw new Error(`replay agent: ${result.reason} ${result.error ?? ""}`);
      await removeWorktree(wt);
      return { worktreeMs: tWorktree - t0, toFirstLineMs: firstLine - t0 };
    };
    const cold = await measure("fl-cold");
    const warm = [await measure("fl-w1"), await measure("fl-w2"), await measure("fl-w3")];
    warm.sort((a, b) => a.toFirstLineMs - b.toFirstLineMs);

    // Parsing throughput: the fixture's lines repeated to ~64 MB, fed in 64 KB chunks.
    const unit = Buffer.from(fixture.endsWith("\n") ? fixture : `${fixture}\n`);
    const big = Buffer.concat(Array.from({ length: Math.ceil((64 << 20) / unit.length) }, () => unit));
    let events = 0;
    const splitter = new LineSplitter((line) => {
      events += claudeAdapter.parseLine(line).length;
    });
    const p0 = performance.now();
    for (let off = 0; off < big.length; off += 65536) splitter.push(big.subarray(off, off + 65536));
    splitter.end();
    const parseMs = performance.now() - p0;

    // N agents at once, each replaying the fixture 50 times with 10 ms pauses.
    const c0 = performance.now();
    const runs = await Promise.all(
      Array.from({ length: agents }, () =>
        runAgent(
          replayAdapter(script, linesFile, 50, 10),
          { prompt: "p", model: "m", phase: "work", cwd: dir },
          { timeoutMs: 120_000, stallMs: 30_000 },
        ),
      ),
    );
    const concurrentMs = performance.now() - c0;
    return {
      repoFiles: files,
      dispatchToSpawnMs: round(warm[1]!.toFirstLineMs),
      dispatchToSpawnColdMs: round(cold.toFirstLineMs),
      worktreeMs: round(warm[1]!.worktreeMs),
      worktreeColdMs: round(cold.worktreeMs),
      parseMBps: round(big.length / (1 << 20) / (parseMs / 1000)),
      parsedMB: round(big.length / (1 << 20)),
      parsedEvents: events,
      concurrentAgents: agents,
      concurrentAllCompleted: runs.every((r) => r.reason === "completed" || r.exitCode === 0),
      concurrentWallMs: Math.round(concurrentMs),
      concurrentEvents: runs.reduce((s, r) => s + r.events, 0),
      note: "warm = cache clone and a spare checkout from an earlier task exist (fetch + reuse: only changed files are written); cold = first task on this machine (full clone + full checkout). Agent = node replaying real Claude stream-json lines.",
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`)
  console.log(JSON.stringify(await runWorkerBench(), null, 2));
