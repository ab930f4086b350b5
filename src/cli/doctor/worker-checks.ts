import { defaultFleetConfig, type FleetConfig } from "../../core/config.ts";
import { type CheckResult, failed, passed, stateCheck } from "../../core/doctor.ts";
import { StateCorruptError } from "../../core/state-doc.ts";
import { DEFAULT_STATE_BRANCH } from "../../state/store.ts";
import { describeTarget, resolveTarget, type Target, type TargetFlags } from "../target.ts";
import { hostChecks } from "./host-checks.ts";

const statusOf = (error: unknown): number | undefined => {
  const s = (error as { status?: unknown })?.status;
  return typeof s === "number" && s > 0 ? s : undefined;
};

/** The target's `.github/fleet.yml` and state branch, as `fleet run` reads them at start. */
async function targetChecks(target: Target): Promise<{ checks: CheckResult[]; config: FleetConfig }> {
  const checks: CheckResult[] = [passed("worker.target", "target", describeTarget(target))];
  const where = target.kind === "github" ? target.full : `local state in ${target.home}`;
  let config = defaultFleetConfig();
  try {
    const file = await target.fileConfig();
    config = file.config;
    checks.push(
      file.problems.length
        ? failed(
            "worker.config",
            ".github/fleet.yml",
            `invalid: ${file.problems.slice(0, 3).join("; ")}`,
            "fix the file on the default branch (`fleet config show` lists every problem)",
          )
        : passed(
            "worker.config",
            ".github/fleet.yml",
            `valid (dispatch: ${config.dispatch}, sandbox: ${config.sandbox})`,
          ),
    );
  } catch (error) {
    checks.push(
      failed(
        "worker.config",
        ".github/fleet.yml",
        `could not be read: ${(error as Error).message}`,
        "the token must read the repository's contents",
      ),
    );
  }
  try {
    const snap = await target.store.read({ why: "doctor" });
    config = await target.config(snap.doc).catch(() => config);
    checks.push(
      stateCheck(where, target.kind === "github" ? DEFAULT_STATE_BRANCH : "the local state", {
        tasks: Object.keys(snap.doc.tasks).length,
        exists: snap.version !== "",
      }),
    );
  } catch (error) {
    const status = statusOf(error);
    checks.push(
      stateCheck(where, target.kind === "github" ? DEFAULT_STATE_BRANCH : "the local state", {
        error: (error as Error).message,
        corrupt: error instanceof StateCorruptError,
        ...(status ? { status } : {}),
      }),
    );
  }
  return { checks, config };
}

/**
 * A worker's side (`fleet run`): where it would work (--repo and its token, or local mode), that
 * repository's config and state, and this machine's git, sandbox, cgroups and coders under that config.
 */
export async function workerChecks(flags: TargetFlags, env: NodeJS.ProcessEnv): Promise<CheckResult[]> {
  let target: Target;
  try {
    target = await resolveTarget(flags, env);
  } catch (error) {
    return [
      failed(
        "worker.target",
        "target",
        (error as Error).message,
        "pass --repo owner/name with GITHUB_TOKEN set (or `gh auth login`), or --local for local mode",
      ),
      ...(await hostChecks(defaultFleetConfig(), env)),
    ];
  }
  const { checks, config } = await targetChecks(target);
  return [...checks, ...(await hostChecks(config, env))];
}
