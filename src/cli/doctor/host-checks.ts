import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { getAdapter } from "../../agents/index.ts";
import { coderFacts } from "../../core/coders.ts";
import type { FleetConfig } from "../../core/config.ts";
import {
  type CheckResult,
  type CoderProbe,
  cgroupCheck,
  coderCheck,
  codersSummary,
  forwarderCheck,
  gitCheck,
  sandboxCheck,
} from "../../core/doctor.ts";
import { assertSandboxAvailable, fleetBinDir, resolveExecutable } from "../../worker/sandbox/bubblewrap.ts";
import { limitsEnforcement } from "../../worker/sandbox/cgroup-limits.ts";
import { defaultForwarder } from "../../worker/sandbox/network.ts";
import { git } from "../../worker/workspace/git.ts";

/** git runs, as Fleet runs it (no system or global config), and can make a repository with a commit. */
async function probeGit(env: NodeJS.ProcessEnv): Promise<{ version: string } | { error: string }> {
  if (!(await resolveExecutable("git", env.PATH))) return { error: "git is not on PATH" };
  let dir: string | undefined;
  try {
    dir = await mkdtemp(join(tmpdir(), "fleet-doctor-git-"));
    const version = (await git(["--version"], { cwd: dir })).stdout.trim();
    await git(["init", "-q"], { cwd: dir });
    await git(["commit", "-q", "--allow-empty", "-m", "doctor"], { cwd: dir });
    return { version };
  } catch (error) {
    return { error: `git does not run: ${(error as Error).message}` };
  } finally {
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}

async function probeSandbox(config: FleetConfig): Promise<{ ok: true } | { error: string }> {
  try {
    await assertSandboxAvailable(config.sandbox);
    return { ok: true };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** The variables a coder's credential may come from here, as `fleet run` looks for them: the configured names, then the CLI's own. */
export function credentialNamesOf(config: FleetConfig, coder: string): string[] {
  const names = [...(config.coders[coder]?.credentials ?? [])];
  const own = getAdapter(coder)?.credentialEnv;
  if (own && !names.includes(own)) names.push(own);
  return names;
}

async function probeCoder(
  config: FleetConfig,
  coder: string,
  env: NodeJS.ProcessEnv,
  run: boolean,
): Promise<CoderProbe> {
  const binary = getAdapter(coder)?.binary ?? coder;
  const names = credentialNamesOf(config, coder);
  const found = names.find((n) => env[n]);
  const npmPackage = coderFacts(coder)?.npmPackage;
  const base: CoderProbe = {
    coder,
    binary,
    credentialNames: names,
    ...(found ? { credentialFound: found } : {}),
    ...(npmPackage ? { npmPackage } : {}),
  };
  // Where a run finds it (findCoderCli): on PATH first, else the one installed with Fleet.
  const onPath = await resolveExecutable(binary, env.PATH);
  const path = onPath ?? (await resolveExecutable(binary, fleetBinDir()));
  if (!path) return { ...base, fleetBin: fleetBinDir() };
  if (!onPath) base.installedWithFleet = true;
  if (!run) return { ...base, path };
  // A private HOME: `--version` must not read or write the worker user's CLI settings.
  const home = await mkdtemp(join(tmpdir(), "fleet-doctor-home-"));
  try {
    const r = await execa(path, ["--version"], {
      env: { PATH: env.PATH ?? "", HOME: home, LANG: env.LANG ?? "C.UTF-8" },
      extendEnv: false,
      reject: false,
      timeout: 30_000,
      stdin: "ignore",
    });
    const first =
      String(r.stdout || r.stderr)
        .trim()
        .split("\n")[0] ?? "";
    if (r.exitCode !== 0)
      return {
        ...base,
        path,
        runError: r.timedOut ? "no answer to --version in 30 s" : `exit ${r.exitCode}: ${first}`,
      };
    return { ...base, path, version: first.replace(new RegExp(`^${binary}\\s*`, "i"), "") };
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

export interface HostCheckOptions {
  /** Run each coder's CLI (`--version`), not only find it on PATH. Default true. */
  runCoders?: boolean;
}

/** Each enabled coder's CLI and credential, and whether any (and the default one) is usable. */
export async function coderChecks(
  config: FleetConfig,
  env: NodeJS.ProcessEnv,
  o: HostCheckOptions = {},
): Promise<CheckResult[]> {
  const coders = Object.entries(config.coders)
    .filter(([, c]) => c.enabled)
    .map(([name]) => name);
  const checks = (
    await Promise.all(coders.map((c) => probeCoder(config, c, env, o.runCoders !== false)))
  ).map(coderCheck);
  const summary = codersSummary(checks, config.default_coder);
  return summary ? [...checks, summary] : checks;
}

/** What a worker machine needs: git, the sandbox the repository's config asks for (and its forwarder), cgroups, the coders. */
export async function hostChecks(
  config: FleetConfig,
  env: NodeJS.ProcessEnv,
  o: HostCheckOptions = {},
): Promise<CheckResult[]> {
  const [gitProbe, sandbox, cgroups, coders] = await Promise.all([
    probeGit(env),
    probeSandbox(config),
    limitsEnforcement(),
    coderChecks(config, env, o),
  ]);
  return [
    gitCheck(gitProbe),
    sandboxCheck(config.sandbox, config.sandbox === "none" ? undefined : sandbox),
    ...(config.sandbox === "bubblewrap" ? [forwarderCheck(defaultForwarder())] : []),
    cgroupCheck(cgroups),
    ...coders,
  ];
}
