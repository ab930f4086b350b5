import { existsSync, readFileSync } from "node:fs";
import { parseEnv } from "node:util";
import { type CheckResult, doctorReport, failures } from "../../core/doctor.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { appChecks, appSettingsFrom } from "../doctor/app-checks.ts";
import { nodeFlagsChecks } from "../doctor/node-flags.ts";
import { workerChecks } from "../doctor/worker-checks.ts";
import { UsageError } from "../errors.ts";
import { json, out } from "../io.ts";

export const DOCTOR_USAGE = `Usage: fleet doctor [--app | --worker] [--state-limit N] [--json]

Checks what \`fleet serve\` and \`fleet run\` need, one line per check, with the fix for each failure.
Exit code 1 when a check failed (warnings do not fail).

The app (fleet serve; settings from the environment, then .env in this folder):
  APP_ID and the private key against GitHub (GET /app, and an installation token minted with the
  permissions a task's run gets), WEBHOOK_SECRET, each installed repository's .github/fleet.yml,
  FLEET_PUBLIC_URL set and answering /fleet/actions-token when a repository uses dispatch: actions
  (so \`fleet serve\` must be running for that line to pass), and each repository's state branch.
A worker (fleet run, and the machine a self-hosted runner works on):
  the target (--repo and GITHUB_TOKEN, or local mode) with its .github/fleet.yml and state branch; git;
  the bubblewrap sandbox; cgroup limits; each enabled coder's CLI (run with --version) and credential.

  --app              only the app's checks
  --worker           only a worker's checks
  --state-limit N    read the state branch of at most N installed repositories (default 20; 0: none)

${TARGET_HELP}`;

const OPTIONS = {
  ...TARGET_OPTIONS,
  app: { type: "boolean" },
  worker: { type: "boolean" },
  "state-limit": { type: "string" },
} as const;

/** The environment with `.env` under it, as `fleet serve` reads its settings (the environment wins). */
export function withDotEnv(env: NodeJS.ProcessEnv, cwd = process.cwd()): NodeJS.ProcessEnv {
  const path = `${cwd}/.env`;
  if (!existsSync(path)) return env;
  return { ...parseEnv(readFileSync(path, "utf8")), ...env };
}

export async function doctorCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, DOCTOR_USAGE);
  if (positionals.length)
    throw new UsageError(`fleet doctor takes no arguments (got "${positionals[0]}").`, DOCTOR_USAGE);
  if (values.app && values.worker)
    throw new UsageError("--app and --worker exclude each other; give neither for both.", DOCTOR_USAGE);
  const limitText = values["state-limit"] ?? "20";
  const stateLimit = Number(limitText);
  if (!Number.isInteger(stateLimit) || stateLimit < 0)
    throw new UsageError(`--state-limit takes a whole number; got "${limitText}".`, DOCTOR_USAGE);
  const checks: CheckResult[] = [];
  if (!values.worker)
    checks.push(
      ...(await appChecks(appSettingsFrom(withDotEnv(process.env)), { probe: true, stateLimit })),
      // From the environment only, as bin/fleet.js reads them (`.env` is read later, by the command).
      await nodeFlagsChecks("serve", process.env),
    );
  if (!values.app)
    checks.push(...(await workerChecks(values, process.env)), await nodeFlagsChecks("run", process.env));
  const ok = failures(checks).length === 0;
  if (values.json) json({ ok, checks });
  else out(doctorReport(checks));
  return ok ? 0 : 1;
}
