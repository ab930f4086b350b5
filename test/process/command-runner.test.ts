import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runProgram, useCommandHelper } from "../../src/process/command-runner.ts";

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
const MODULE = join(import.meta.dirname, "../../src/process/command-runner.ts");

/** A node process that imports the runner and runs `body` (an async function's body, given runProgram and env). */
function nodeWith(body: string, extraEnv: Record<string, string> = {}, nodeArgs: string[] = []) {
  const script = `import { runProgram, useCommandHelper } from ${JSON.stringify(MODULE)};
if (!process.env.NO_HELPER) useCommandHelper();
const env = { PATH: process.env.PATH };
${body}`;
  return promisify(execFile)(process.execPath, [...nodeArgs, "--input-type=module", "-e", script], {
    env: { ...process.env, ...extraEnv },
    timeout: 30_000,
  });
}

describe("the command runner", () => {
  useCommandHelper();
  it("runs a program with exactly the environment, folder and input given, and buffers what it writes", async () => {
    process.env.FLEET_RUNNER_TEST_SECRET = "not-for-the-program";
    try {
      const r = await runProgram({
        file: "sh",
        args: ["-c", 'pwd; echo "[$FLEET_RUNNER_TEST_SECRET][$ONLY_THIS]"; cat; echo oops >&2; exit 3'],
        cwd: "/tmp",
        env: { ...env, ONLY_THIS: "given" },
        input: "from stdin",
      });
      expect(r.exitCode).toBe(3);
      expect(r.stdout.toString()).toBe("/tmp\n[][given]\nfrom stdin");
      expect(r.stderr.toString()).toBe("oops\n");
      expect(r.error).toBeUndefined();
    } finally {
      delete process.env.FLEET_RUNNER_TEST_SECRET;
    }
  });

  it("hands binary output back byte for byte, and many programs at once each their own", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const r = await runProgram({ file: "cat", args: [], env, input: bytes });
    expect(Buffer.compare(r.stdout, bytes)).toBe(0);
    const many = await Promise.all(
      Array.from({ length: 30 }, (_, i) => runProgram({ file: "sh", args: ["-c", `echo ${i}`], env })),
    );
    expect(many.map((m) => m.stdout.toString().trim())).toEqual(Array.from({ length: 30 }, (_, i) => `${i}`));
  });

  it("says why a program could not start instead of throwing", async () => {
    const r = await runProgram({ file: "fleet-no-such-program", args: [], env });
    expect(r.exitCode).not.toBe(0);
    expect(r.error).toMatch(/ENOENT/);
  });

  it("starts programs from a helper that outlives a terminal's signals and ends with its parent, which it never keeps alive", async () => {
    // The program's parent is the helper: its pid, then a SIGTERM and SIGINT to it, then another program.
    const { stdout } = await nodeWith(`
const first = (await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env })).stdout.toString().trim();
process.kill(Number(first), "SIGTERM");
process.kill(Number(first), "SIGINT");
await new Promise((r) => setTimeout(r, 200));
const second = (await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env })).stdout.toString().trim();
console.log(JSON.stringify({ self: process.pid, first, second }));
`);
    const { self, first, second } = JSON.parse(stdout) as { self: number; first: string; second: string };
    expect(Number(first)).not.toBe(self);
    expect(second).toBe(first);
    // The parent ended on its own (nothing kept it alive); its helper followed it.
    for (let i = 0; i < 50 && existsSync(`/proc/${first}`); i++) await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(`/proc/${first}`)).toBe(false);
  });

  it("answers the commands under way as failed when the helper is killed, and starts a new one for the next", async () => {
    const { stdout } = await nodeWith(`
const helper = (await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env })).stdout.toString().trim();
const slow = runProgram({ file: "sleep", args: ["30"], env });
await new Promise((r) => setTimeout(r, 200));
process.kill(Number(helper), "SIGKILL");
const cut = await slow;
const next = (await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env })).stdout.toString().trim();
console.log(JSON.stringify({ helper, cut: { exitCode: cut.exitCode, error: cut.error }, next }));
`);
    const { helper, cut, next } = JSON.parse(stdout) as {
      helper: string;
      cut: { exitCode: number | null; error?: string };
      next: string;
    };
    expect(cut.exitCode).toBeNull();
    expect(cut.error).toMatch(/command helper stopped/);
    expect(next).not.toBe(helper);
  });

  it("works from the module as tsx compiles it (function names kept) and as the app's and the action's bundles hold it", async () => {
    const body = `const r = await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env });
console.log(JSON.stringify({ self: process.pid, parent: Number(r.stdout.toString()), code: r.exitCode }));`;
    const underTsx = JSON.parse((await nodeWith(body, {}, ["--import", "tsx"])).stdout) as Record<
      string,
      number
    >;
    expect(underTsx.code).toBe(0);
    expect(underTsx.parent).not.toBe(underTsx.self);
    // The bundles: esbuild's output of the same functions, run as the helper's source.
    for (const [entry, format] of [
      ["app", "esm"],
      ["action", "cjs"],
    ] as const) {
      const { build } = await import("esbuild");
      const out = await build({
        entryPoints: [MODULE],
        bundle: true,
        write: false,
        platform: "node",
        format,
        target: "node22",
        keepNames: entry === "action",
      });
      const dir = await mkdtemp(join(tmpdir(), "fleet-runner-"));
      try {
        const file = join(dir, format === "esm" ? "runner.mjs" : "runner.cjs");
        await writeFile(file, out.outputFiles[0]!.text);
        const script =
          format === "esm"
            ? `const { runProgram, useCommandHelper } = await import(${JSON.stringify(file)}); useCommandHelper();`
            : `const { runProgram, useCommandHelper } = require(${JSON.stringify(file)}); useCommandHelper();`;
        const { stdout } = await promisify(execFile)(
          process.execPath,
          [
            ...(format === "esm" ? ["--input-type=module"] : []),
            "-e",
            `${format === "esm" ? "" : "(async () => {"}${script}
const env = { PATH: process.env.PATH };
${body}${format === "esm" ? "" : "})();"}`,
          ],
          { timeout: 30_000 },
        );
        const r = JSON.parse(stdout) as Record<string, number>;
        expect(r.code, entry).toBe(0);
        expect(r.parent, entry).not.toBe(r.self);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
  });

  it("starts programs from the process itself unless it asked for a helper (a one-shot command)", async () => {
    const { stdout } = await nodeWith(
      `const r = await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env });
console.log(JSON.stringify({ self: process.pid, parent: Number(r.stdout.toString()) }));`,
      { NO_HELPER: "1" },
    );
    const { self, parent } = JSON.parse(stdout) as { self: number; parent: number };
    expect(parent).toBe(self);
  });

  it("starts programs from this process itself with FLEET_COMMANDS=direct", async () => {
    const { stdout } = await nodeWith(
      `const r = await runProgram({ file: "sh", args: ["-c", "echo $PPID"], env });
console.log(JSON.stringify({ self: process.pid, parent: Number(r.stdout.toString()) }));`,
      { FLEET_COMMANDS: "direct" },
    );
    const { self, parent } = JSON.parse(stdout) as { self: number; parent: number };
    expect(parent).toBe(self);
  });
});
