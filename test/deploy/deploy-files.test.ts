// The deployment's files as what they claim to be: workflows GitHub's parser accepts, docs whose YAML,
// systemd units and shell commands are valid, a Dockerfile that copies what exists, an app manifest
// with the permissions Fleet's runs use, and a release job whose tag steps do what they say.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { RUN_PERMISSIONS } from "../../src/core/doctor.ts";
import { workflowErrors } from "../support/workflow-check.ts";

const read = (path: string) => readFileSync(path, "utf8");
const pkg = JSON.parse(read("package.json")) as { devDependencies: Record<string, string> };

/** The fenced blocks of a markdown file in `lang` (```yaml, ```ini, ```sh). */
function blocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]!);
}

const isWorkflow = (doc: unknown): boolean =>
  typeof doc === "object" && doc !== null && "jobs" in doc && "on" in doc;

/** Each build argument's npm package: its version in docs and the Dockerfile is the one the tests run. */
const CODER_ARGS: Record<string, string> = {
  CLAUDE_CODE_VERSION: "@anthropic-ai/claude-code",
  CODEX_VERSION: "@openai/codex",
  GEMINI_CLI_VERSION: "@google/gemini-cli",
  OPENCODE_VERSION: "opencode-ai",
};

describe("workflows: the repository's, the release, and those in docs/", () => {
  it("GitHub's workflow parser accepts every one", async () => {
    const files = [
      ...readdirSync(".github/workflows").map((f) => `.github/workflows/${f}`),
      ...readdirSync("docs")
        .filter((f) => f.endsWith(".yml") || f.endsWith(".yaml"))
        .map((f) => `docs/${f}`),
    ].map((name) => ({ name, content: read(name) }));
    const inDocs = readdirSync("docs")
      .filter((f) => f.endsWith(".md"))
      .flatMap((f) =>
        blocks(read(`docs/${f}`), "yaml").map((content, i) => ({ name: `docs/${f}#${i}`, content })),
      )
      .filter((b) => isWorkflow(parse(b.content)));
    const all = [...files, ...inDocs];
    expect(all.map((f) => f.name)).toContain(".github/workflows/release.yml");
    const errors = await workflowErrors(all);
    expect(Object.fromEntries(all.map((f, i) => [f.name, errors[i]]))).toEqual(
      Object.fromEntries(all.map((f) => [f.name, []])),
    );
  });

  it("release.yml: on a version tag, checks dist/ and the action's tests, then moves the major tag", () => {
    const w = parse(read(".github/workflows/release.yml")) as {
      on: { push: { tags: string[] } };
      permissions: Record<string, string>;
      jobs: { release: { steps: Array<{ name?: string; run?: string; uses?: string }> } };
    };
    expect(w.on.push.tags).toEqual(["v[0-9]+.[0-9]+.[0-9]+"]);
    expect(w.permissions).toEqual({ contents: "write" });
    const runs = w.jobs.release.steps.map((s) => s.run ?? "").join("\n");
    expect(runs).toMatch(/npm run build:action\n\s*if ! git diff --quiet -- dist\//);
    expect(runs).toContain("test/action/dist.test.ts");
    expect(runs).toContain('git push -f origin "refs/tags/$major"');
  });
});

describe("release.yml's tag steps, run in a scratch repository", () => {
  let dir: string;
  const step = (name: string) => {
    const w = parse(read(".github/workflows/release.yml")) as {
      jobs: { release: { steps: Array<{ name?: string; run?: string }> } };
    };
    return w.jobs.release.steps.find((s) => s.name === name)!.run!;
  };
  const sh = (cwd: string, script: string, env: Record<string, string>) =>
    execa("bash", ["-e", "-c", script], {
      cwd,
      env: { PATH: process.env.PATH ?? "", ...env },
      reject: false,
    });
  const git = (cwd: string, ...args: string[]) =>
    execa("git", ["-c", "user.name=r", "-c", "user.email=r@e", ...args], { cwd }).then((r) =>
      r.stdout.trim(),
    );

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-release-"));
    await execa("git", ["init", "-q", "--bare", "-b", "main", join(dir, "origin.git")]);
    await execa("git", ["clone", "-q", join(dir, "origin.git"), join(dir, "work")]);
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("refuses a tag off the default branch, and moves v1 to each release in turn", async () => {
    const work = join(dir, "work");
    const summary = join(dir, "summary.md");
    await writeFile(summary, "");
    await git(work, "commit", "-q", "--allow-empty", "-m", "one");
    await git(work, "push", "-q", "origin", "HEAD:main");
    const first = await git(work, "rev-parse", "HEAD");
    await git(work, "checkout", "-q", "-b", "side");
    await git(work, "commit", "-q", "--allow-empty", "-m", "off main");
    const side = await git(work, "rev-parse", "HEAD");
    await git(work, "fetch", "-q", "origin");

    const onMain = step("The tag is on the default branch");
    const env = (sha: string, tag: string) => ({
      GITHUB_SHA: sha,
      GITHUB_REF_NAME: tag,
      DEFAULT_BRANCH: "main",
      GITHUB_STEP_SUMMARY: summary,
    });
    expect((await sh(work, onMain, env(first, "v1.0.0"))).exitCode).toBe(0);
    const off = await sh(work, onMain, env(side, "v1.0.1"));
    expect(off.exitCode).toBe(1);
    expect(off.stdout).toContain("::error::v1.0.1 is not on main");

    const move = step("Move the major tag");
    expect((await sh(work, move, env(first, "v1.0.0"))).exitCode).toBe(0);
    expect(await git(join(dir, "origin.git"), "rev-parse", "v1")).toBe(first);
    await git(work, "checkout", "-q", "main");
    await git(work, "commit", "-q", "--allow-empty", "-m", "two");
    const second = await git(work, "rev-parse", "HEAD");
    expect((await sh(work, move, env(second, "v1.1.0"))).exitCode).toBe(0);
    expect(await git(join(dir, "origin.git"), "rev-parse", "v1")).toBe(second);
    expect(await readFile(summary, "utf8")).toContain(`v1 -> v1.1.0 (${second})`);
  });
});

describe("docs/deploy.md", () => {
  const doc = read("docs/deploy.md");

  it("its YAML parses; the Compose file runs the app and a worker with what bubblewrap needs", () => {
    const yamls = blocks(doc, "yaml").map((b) => parse(b) as Record<string, unknown>);
    const compose = yamls.find((y) => "services" in y) as {
      services: Record<string, { command: unknown; security_opt?: string[] }>;
    };
    expect(compose.services.app!.command).toBe("serve");
    expect((compose.services.worker!.command as string[])[0]).toBe("run");
    expect(compose.services.worker!.security_opt).toEqual([
      "seccomp=unconfined",
      "apparmor=unconfined",
      "systempaths=unconfined",
    ]);
    // No container option that hands out capabilities.
    expect(doc).not.toMatch(/^\s+--privileged|--cap-add [A-Z]/m);
  });

  it("its shell commands are valid sh", async () => {
    const sh = blocks(doc, "sh");
    expect(sh.length).toBeGreaterThan(2);
    for (const script of sh)
      expect((await execa("/bin/sh", ["-n"], { input: script, reject: false })).exitCode).toBe(0);
  });

  it("its systemd units are valid (systemd-analyze verify)", async () => {
    const units = blocks(doc, "ini");
    expect(units.map((u) => /^# \/etc\/systemd\/system\/(\S+)$/m.exec(u)?.[1])).toEqual([
      "fleet-app.service",
      "fleet-worker@.service",
    ]);
    expect(units[1]).toMatch(/^Delegate=yes$/m);
    const analyze = await execa("systemd-analyze", ["--version"], { reject: false }).catch(() => undefined);
    // Where systemd is not installed the units are checked by the lines above only.
    if (analyze?.exitCode !== 0) return;
    const dir = await mkdtemp(join(tmpdir(), "fleet-units-"));
    try {
      for (const [name, unit] of [
        ["fleet-app.service", units[0]!],
        ["fleet-worker@widgets.service", units[1]!],
      ] as const) {
        const path = join(dir, name);
        await writeFile(path, unit);
        const r = await execa("systemd-analyze", ["verify", path], { reject: false });
        expect(`${r.stdout}\n${r.stderr}`.trim(), name).not.toMatch(
          /Unknown key|Failed to parse|Invalid|Missing/,
        );
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("names the coder CLI versions Fleet's tests run", () => {
    for (const [arg, name] of Object.entries(CODER_ARGS))
      expect(doc, arg).toContain(`--build-arg ${arg}=${pkg.devDependencies[name]}`);
  });
});

describe("the Dockerfile", () => {
  const text = read("Dockerfile");
  const lines = text.split("\n");

  it("Node 24, git, bubblewrap and tini; not root; the entry point is docker/entrypoint.sh", () => {
    expect(text).toMatch(/^FROM node:24-/m);
    expect(text).toMatch(/apt-get install -y --no-install-recommends git bubblewrap ca-certificates tini/);
    expect(text).toMatch(/^COPY docker\/entrypoint\.sh \/usr\/local\/bin\/fleet-entrypoint$/m);
    expect(text).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "\/usr\/local\/bin\/fleet-entrypoint"\]$/m);
    expect(text).toMatch(/^USER node$/m);
    expect(read(".dockerignore").split("\n")).toEqual(
      expect.arrayContaining([".env", "*.pem", "node_modules"]),
    );
  });

  it("copies only what exists", () => {
    const sources = lines
      .filter((l) => l.startsWith("COPY "))
      .flatMap((l) => l.slice(5).trim().split(/\s+/).slice(0, -1));
    expect(sources.length).toBeGreaterThan(5);
    for (const s of sources) expect(existsSync(s), s).toBe(true);
  });

  it("each coder CLI is an optional layer of the right package, and its example version is the tested one", () => {
    for (const [arg, name] of Object.entries(CODER_ARGS)) {
      expect(text).toMatch(new RegExp(`^ARG ${arg}=""$`, "m"));
      expect(text).toContain(`"${name}@$${arg}"`);
    }
    for (const m of text.matchAll(/--build-arg (\w+)=(\S+)/g))
      expect(m[2], m[1]).toBe(pkg.devDependencies[CODER_ARGS[m[1]!]!]);
  });
});

describe("app.yml", () => {
  const app = parse(read("app.yml")) as Record<string, unknown> & {
    default_permissions: Record<string, string>;
  };

  it("a real homepage, and no hook block that would drop the webhook URL Probot's setup fills in", () => {
    expect(app.url).toMatch(/^https:\/\/github\.com\/[\w-]+\/fleet$/);
    expect(app).not.toHaveProperty("hook_attributes");
    expect(read("app.yml")).toMatch(/<FLEET_PUBLIC_URL>\/api\/github\/webhooks/);
  });

  it("asks for what a task's run is minted with (the doctor checks the same), and metadata", () => {
    expect(app.default_permissions).toEqual({ metadata: "read", ...RUN_PERMISSIONS });
  });
});
