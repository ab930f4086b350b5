// docs/scale.md and the runner image: the chart values parse and use only keys the
// gha-runner-scale-set chart takes, the sizing figure adds up, the labels match, and the runner image's
// entry point is run as a script with stand-in tools (no container engine or cluster here).
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { defaultFleetConfig, parseFleetConfig } from "../../src/core/config-file.ts";

const read = (path: string) => readFileSync(path, "utf8");
const pkg = JSON.parse(read("package.json")) as { devDependencies: Record<string, string> };
const doc = read("docs/scale.md");
const dockerfile = read("docker/runner/Dockerfile");
const ENTRYPOINT = resolve("docker/runner/entrypoint.sh");

function blocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]!);
}

/** The top-level keys of the gha-runner-scale-set chart's values.yaml (chart 0.14.2), set or commented. */
const CHART_KEYS = [
  "githubConfigUrl",
  "scaleSetLabels",
  "githubConfigSecret",
  "proxy",
  "maxRunners",
  "minRunners",
  "runnerGroup",
  "runnerScaleSetName",
  "githubServerTLS",
  "keyVault",
  "containerMode",
  "listenerTemplate",
  "listenerMetrics",
  "template",
  "controllerServiceAccount",
  "namespaceOverride",
  "annotations",
  "labels",
  "resourceMeta",
];

/** Each build argument's npm package, as in the app's Dockerfile. */
const CODER_ARGS: Record<string, string> = {
  CLAUDE_CODE_VERSION: "@anthropic-ai/claude-code",
  CODEX_VERSION: "@openai/codex",
  GEMINI_CLI_VERSION: "@google/gemini-cli",
  OPENCODE_VERSION: "opencode-ai",
};

interface Container {
  name: string;
  image: string;
  command?: string[];
  env?: Array<{ name: string; value?: string }>;
  securityContext?: Record<string, unknown> & { capabilities?: { add?: string[]; drop?: string[] } };
}
interface Values {
  githubConfigUrl: string;
  githubConfigSecret: string | Record<string, string>;
  runnerScaleSetName: string;
  maxRunners: number;
  minRunners: number;
  containerMode?: unknown;
  template: {
    spec: {
      hostUsers?: boolean;
      securityContext?: Record<string, unknown>;
      containers: Container[];
    };
  };
}

const yamls = blocks(doc, "yaml").map((b) => parse(b) as Record<string, unknown>);
const values = yamls.find((y) => "githubConfigUrl" in y) as unknown as Values;

/** The sizing table: each repository's max_concurrent, and the slots row. */
function sizingTable(): { rows: Array<[string, number]>; slots: number } {
  const lines = doc.split("\n").filter((l) => /^\| (\S+\/\S+|\*\*slots\*\*) \|/.test(l));
  const cells = lines.map((l) => l.split("|").map((c) => c.trim().replaceAll("*", "")));
  const rows = cells.filter((c) => c[1] !== "slots").map((c) => [c[1]!, Number(c[2])] as [string, number]);
  const slots = Number(cells.find((c) => c[1] === "slots")?.[2]);
  return { rows, slots };
}

describe("docs/scale.md: the gha-runner-scale-set values", () => {
  it("parse, use only the chart's keys, and hold what a scale set needs", () => {
    expect(values, "a ```yaml block with githubConfigUrl").toBeDefined();
    for (const key of Object.keys(values)) expect(CHART_KEYS, key).toContain(key);
    expect(values.githubConfigUrl).toMatch(/^https:\/\/github\.com\/[\w.-]+(\/[\w.-]+)?$/);
    // A pre-made secret's name, or the secret's fields themselves.
    if (typeof values.githubConfigSecret === "string") {
      expect(values.githubConfigSecret).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      // The kubectl command makes that secret with the fields the chart reads.
      const make = blocks(doc, "sh").join("\n");
      expect(make).toContain(`kubectl create secret generic ${values.githubConfigSecret} `);
      for (const field of ["github_app_id", "github_app_installation_id", "github_app_private_key"])
        expect(make).toContain(`${field}=`);
    } else {
      expect(Object.keys(values.githubConfigSecret).length).toBeGreaterThan(0);
    }
    expect(values.runnerScaleSetName).toMatch(/^[\w.-]+$/);
    expect(Number.isInteger(values.maxRunners) && values.maxRunners > 0).toBe(true);
    expect(Number.isInteger(values.minRunners) && values.minRunners >= 0).toBe(true);
    expect(values.minRunners).toBeLessThanOrEqual(values.maxRunners);
    // dind would bring a privileged container; kubernetes mode runs jobs where the action does not.
    expect(values.containerMode).toBeUndefined();
  });

  it("the runner container runs the Fleet runner image through its entry point", () => {
    const runner = values.template.spec.containers.find((c) => c.name === "runner");
    expect(runner, "a container named runner (the chart's name for it)").toBeDefined();
    expect(runner!.image).toMatch(/fleet-runner:/);
    const installed = /^COPY docker\/runner\/entrypoint\.sh (\S+)$/m.exec(dockerfile)?.[1];
    expect(installed).toBeDefined();
    expect(runner!.command).toEqual([installed]);
    const coders = runner!.env?.find((e) => e.name === "FLEET_CODERS")?.value ?? "";
    expect(coders.split(/[ ,]+/).filter(Boolean).length).toBeGreaterThan(0);
  });

  it("the pod allows what bubblewrap needs and hands out no capability", () => {
    const spec = values.template.spec;
    const runner = spec.containers.find((c) => c.name === "runner")!;
    // procMount: Unmasked is accepted only in a pod with a user namespace of its own.
    expect(spec.hostUsers).toBe(false);
    expect(runner.securityContext?.procMount).toBe("Unmasked");
    expect(spec.securityContext?.seccompProfile).toEqual({ type: "Unconfined" });
    expect(spec.securityContext?.appArmorProfile).toEqual({ type: "Unconfined" });
    expect(spec.securityContext?.runAsNonRoot).toBe(true);
    expect(runner.securityContext?.privileged).toBeUndefined();
    expect(runner.securityContext?.allowPrivilegeEscalation).toBe(false);
    expect(runner.securityContext?.capabilities).toEqual({ drop: ["ALL"] });
    // The node's sysctls are named, since a pod cannot set them.
    for (const sysctl of ["user.max_user_namespaces", "kernel.apparmor_restrict_unprivileged_userns"])
      expect(doc).toContain(sysctl);
  });
});

describe("docs/scale.md: sizing and labels", () => {
  it("maxRunners is max_concurrent summed over the repositories in the table", () => {
    const { rows, slots } = sizingTable();
    expect(rows.length).toBeGreaterThan(1);
    const sum = rows.reduce((n, [, c]) => n + c, 0);
    expect(slots).toBe(sum);
    expect(values.maxRunners).toBe(sum);
    // The values' comment shows the same addition.
    expect(doc).toContain(`(${rows.map(([, c]) => c).join(" + ")})`);
    expect(doc).toContain(`So ${sum} runners: \`maxRunners: ${sum}\``);
  });

  it("a repository served by the scale set names it in runner_labels, in a fleet.yml Fleet accepts", () => {
    const fleetYml = blocks(doc, "yaml").find((b) => /^runner_labels:/m.test(b));
    expect(fleetYml).toBeDefined();
    const parsed = parseFleetConfig(fleetYml!);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    expect(parsed.config.runner_labels).toEqual([values.runnerScaleSetName]);
    // The example repository is one of the table's, with its max_concurrent.
    expect(sizingTable().rows.map(([, c]) => c)).toContain(parsed.config.max_concurrent);
  });

  it("a pooled runner registered as the doc says carries Fleet's default runner_labels", () => {
    const register = blocks(doc, "sh").join("\n");
    const extra = /\.\/config\.sh [\s\S]*?--labels (\S+)/.exec(register)?.[1];
    expect(extra).toBeDefined();
    // config.sh adds self-hosted, the OS and the architecture to every runner.
    const labels = new Set(["self-hosted", "Linux", "X64", ...extra!.split(",")]);
    for (const label of defaultFleetConfig().runner_labels) expect(labels, label).toContain(label);
  });

  it("its shell commands are valid sh, and its coder versions are the ones Fleet's tests run", async () => {
    const sh = blocks(doc, "sh");
    expect(sh.length).toBeGreaterThan(2);
    for (const script of sh)
      expect((await execa("/bin/sh", ["-n"], { input: script, reject: false })).exitCode, script).toBe(0);
    const args = [...doc.matchAll(/--build-arg (\w+)=(\S+)/g)];
    expect(args.length).toBeGreaterThan(0);
    for (const m of args) expect(m[2], m[1]).toBe(pkg.devDependencies[CODER_ARGS[m[1]!]!]);
    const installs = [...doc.matchAll(/(@?[\w/-]+(?:-ai|code|codex|cli))@(\d+\.\d+\.\d+)/g)];
    expect(installs.length).toBeGreaterThan(0);
    for (const m of installs) expect(m[2], m[1]).toBe(pkg.devDependencies[m[1]!]);
  });
});

describe("docker/runner/Dockerfile", () => {
  it("GitHub's runner image with git, bubblewrap and Node 24; the entry point; back to the runner user", () => {
    expect(dockerfile).toMatch(/^FROM ghcr\.io\/actions\/actions-runner:\$\{RUNNER_VERSION\}$/m);
    expect(dockerfile).toMatch(/^ARG RUNNER_VERSION=2\.(\d+)\.\d+$/m);
    // Fleet's action runs on node24: Actions Runner 2.327.1 or later.
    const minor = Number(/^ARG RUNNER_VERSION=2\.(\d+)\./m.exec(dockerfile)![1]);
    expect(minor).toBeGreaterThanOrEqual(328);
    expect(dockerfile).toMatch(/^FROM node:24-\S+ AS node$/m);
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends git bubblewrap/);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/local\/bin\/fleet-runner-entrypoint"\]$/m);
    expect(
      dockerfile
        .trim()
        .split("\n")
        .filter((l) => l.startsWith("USER "))
        .at(-1),
    ).toBe("USER runner");
    const sources = dockerfile
      .split("\n")
      .filter((l) => l.startsWith("COPY ") && !l.includes("--from="))
      .flatMap((l) => l.slice(5).trim().split(/\s+/).slice(0, -1));
    expect(sources).toEqual(["docker/runner/entrypoint.sh"]);
    for (const s of sources) expect(existsSync(s), s).toBe(true);
  });

  it("each coder CLI is an optional layer of the right package; the example versions are the tested ones", () => {
    for (const [arg, name] of Object.entries(CODER_ARGS)) {
      expect(dockerfile).toMatch(new RegExp(`^ARG ${arg}=""$`, "m"));
      expect(dockerfile).toContain(`"${name}@$${arg}"`);
    }
    for (const m of dockerfile.matchAll(/--build-arg (\w+)=(\S+)/g))
      expect(m[2], m[1]).toBe(pkg.devDependencies[CODER_ARGS[m[1]!]!]);
  });
});

describe("docker/runner/entrypoint.sh", () => {
  let dir: string;
  let bin: string;
  let log: string;

  /** A stand-in command in bin/ that records its name and arguments and exits with $<NAME>_EXIT. */
  async function tool(name: string, extra = "") {
    const path = join(bin, name);
    const code = `${name.toUpperCase().replace(/\W/g, "_")}_EXIT`;
    await writeFile(
      path,
      `#!/bin/sh\nprintf '%s %s\\n' "${name}" "$*" >> "${log}"\n${extra}exit "\${${code}:-0}"\n`,
    );
    await chmod(path, 0o755);
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-runner-entry-"));
    bin = join(dir, "bin");
    log = join(dir, "calls");
    await execa("mkdir", [bin]);
    await tool("git");
    await tool(
      "bwrap",
      `[ "\${BWRAP_EXIT:-0}" = 0 ] || echo "bwrap: No permissions to create new namespace" >&2\n`,
    );
    await tool("claude");
    await tool("run.sh");
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Runs the entry point under /bin/sh with only these tools on PATH (the shell's builtins do the rest). */
  async function entry(args: string[], env: Record<string, string> = {}, path = bin) {
    await writeFile(log, "");
    const r = await execa("/bin/sh", [ENTRYPOINT, ...args], {
      env: { PATH: path, RUNNER_RUN: join(bin, "run.sh"), ...env },
      extendEnv: false,
      reject: false,
    });
    const calls = (await readFile(log, "utf8")).split("\n").filter(Boolean);
    return { code: r.exitCode, stderr: String(r.stderr), calls };
  }

  it("checks git, a sandbox like Fleet's and the coders' CLIs, then becomes the runner with its arguments", async () => {
    const r = await entry(["--once"], { FLEET_CODERS: "claude" });
    expect(r.stderr).toContain("ok   git");
    expect(r.stderr).toContain("ok   bubblewrap starts a sandbox");
    expect(r.stderr).toContain("ok   claude CLI");
    expect(r.code).toBe(0);
    const sandbox = r.calls.find((c) => c.startsWith("bwrap "))!;
    for (const flag of [
      "--unshare-user",
      "--disable-userns",
      "--unshare-pid",
      "--unshare-net",
      "--proc /proc",
    ])
      expect(sandbox).toContain(flag);
    expect(r.calls.at(-1)).toBe("run.sh --once");
  });

  it("the runner's exit code is the container's", async () => {
    const r = await entry([], { RUN_SH_EXIT: "3" });
    expect(r.code).toBe(3);
    expect(r.calls.at(-1)).toBe("run.sh ");
  });

  it("check: the checks alone, for a pooled runner", async () => {
    const r = await entry(["check"], { FLEET_CODERS: "claude" });
    expect(r.code).toBe(0);
    expect(r.calls.some((c) => c.startsWith("run.sh"))).toBe(false);
  });

  it("a sandbox that does not start: its message, the fix, every failure, and no runner", async () => {
    const r = await entry([], { BWRAP_EXIT: "1", FLEET_CODERS: "claude,codex" });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /FAIL bubblewrap cannot start a sandbox: bwrap: No permissions to create new namespace -> fix: .*seccomp.*AppArmor.*\/proc.*docs\/scale\.md/,
    );
    // codex is not among the tools: reported in the same run, claude is fine.
    expect(r.stderr).toContain("FAIL codex CLI: 'codex' not found on PATH -> fix:");
    expect(r.stderr).toContain("ok   claude CLI");
    expect(r.stderr).toContain("the runner did not start");
    expect(r.calls.some((c) => c.startsWith("run.sh"))).toBe(false);
  });

  it("git or bubblewrap missing: named, with what to install", async () => {
    const empty = join(dir, "empty");
    await execa("mkdir", ["-p", empty]);
    const r = await entry([], {}, empty);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("FAIL git: not found on PATH -> fix: install git in the runner image");
    expect(r.stderr).toContain("FAIL bubblewrap: bwrap not found on PATH -> fix: install bubblewrap");
    expect(r.calls).toEqual([]);
  });

  it("a coder name that is not one stops at once, listing the coders", async () => {
    const r = await entry([], { FLEET_CODERS: "claude cluade" });
    expect(r.code).toBe(64);
    expect(r.stderr).toContain(
      "FLEET_CODERS names 'cluade', which is not a coder: use claude, codex, gemini or opencode",
    );
    expect(r.calls.some((c) => c.startsWith("run.sh"))).toBe(false);
  });

  it("with this machine's real git and bubblewrap, where user namespaces are allowed", async () => {
    const probe = await execa(
      "bwrap",
      [
        "--unshare-user",
        "--disable-userns",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
      ],
      { reject: false },
    ).catch(() => undefined);
    // Where the host refuses them the stand-ins above are the test.
    if (probe?.exitCode !== 0) return;
    const r = await entry(["check"], {}, process.env.PATH ?? "/usr/bin:/bin");
    expect(r.stderr).toContain("ok   bubblewrap starts a sandbox");
    expect(r.code).toBe(0);
  });
});
