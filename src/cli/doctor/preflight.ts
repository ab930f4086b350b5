import type { FleetConfig } from "../../core/config.ts";
import { type CheckResult, doctorLine, failures, publicUrlCheck } from "../../core/doctor.ts";
import { CliError } from "../errors.ts";
import {
  ACTIONS_TOKEN_PATH,
  type AppSettings,
  appChecks,
  appSettingsFrom,
  probePublicUrl,
} from "./app-checks.ts";
import { hostChecks } from "./host-checks.ts";

/**
 * Stops a start with `fleet doctor`'s lines for what failed; hands the warnings to `warn`, without their
 * fixes (`fleet doctor` prints those): a start's log says what is wrong in a line each.
 */
function stopOnFailures(command: string, checks: readonly CheckResult[], warn: (line: string) => void): void {
  const warnings = checks.filter((c) => c.status === "warn");
  for (const c of warnings) warn(doctorLine({ ...c, fix: "" }));
  if (warnings.length) warn(`(\`fleet doctor\` says how to fix ${warnings.length === 1 ? "it" : "each"})`);
  const failed = failures(checks);
  if (failed.length)
    throw new CliError(
      `cannot start:\n${failed.map(doctorLine).join("\n")}\n(\`fleet doctor\` runs every check; fix these, then start ${command} again.)`,
    );
}

/**
 * What `fleet serve` checks before it listens: the app's credentials against GitHub (GET /app, an
 * installation token with a run's permissions), the webhook secret, and FLEET_PUBLIC_URL when an
 * installed repository uses dispatch: actions. Throws a CliError with the failing lines.
 */
export async function appPreflight(
  env: NodeJS.ProcessEnv,
  warn: (line: string) => void,
): Promise<AppSettings> {
  const settings = appSettingsFrom(env);
  stopOnFailures(
    "fleet serve",
    await appChecks(settings, { probe: false, stateLimit: 0, quick: true }),
    warn,
  );
  return settings;
}

/** Once `fleet serve` listens: whether FLEET_PUBLIC_URL reaches it (a line to log when it does not). */
export async function publicUrlAfterStart(settings: AppSettings): Promise<CheckResult | undefined> {
  if (!settings.publicUrl || !/^https?:\/\//.test(settings.publicUrl)) return undefined;
  const check = publicUrlCheck({
    url: settings.publicUrl,
    actionsRepos: [],
    probe: await probePublicUrl(settings.publicUrl),
    tokenPath: ACTIONS_TOKEN_PATH,
  });
  return check.status === "ok" ? undefined : check;
}

/** The checks that stop `fleet run` at start: work there would fail at its first task. */
const FATAL_AT_RUN_START = new Set(["host.git", "host.sandbox"]);

/**
 * What `fleet run` checks before it claims a task: git, the sandbox the config asks for, cgroups and
 * the coders' CLIs and credentials (found on PATH; `fleet doctor` also runs them). No git or no sandbox
 * stops the start; a coder not set up here is a warning (a worker with nothing queued may start without).
 */
export async function workerPreflight(
  config: FleetConfig,
  env: NodeJS.ProcessEnv,
  warn: (line: string) => void,
): Promise<void> {
  const checks = await hostChecks(config, env, { runCoders: false });
  const fatal = checks.map((c) =>
    c.status === "fail" && !FATAL_AT_RUN_START.has(c.id) ? { ...c, status: "warn" as const } : c,
  );
  stopOnFailures("fleet run", fatal, warn);
}
