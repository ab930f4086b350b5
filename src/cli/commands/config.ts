import { stringify } from "yaml";
import {
  assignmentsText,
  CONFIG_KEYS,
  FILE_ONLY_KEYS,
  parseConfigAssignments,
  resolveOverrides,
  updateOverrides,
} from "../../core/config.ts";
import { setConfigOverrides } from "../../queue/transitions.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { CliError, UsageError } from "../errors.ts";
import { err, json, out } from "../io.ts";
import { describeTarget, resolveTarget, type Target } from "../target.ts";

export const CONFIG_USAGE = `Usage: fleet config show [--json]
       fleet config set key=value [key=value ...]

show   the effective config: .github/fleet.yml (or defaults) with the overrides set here
set    validated overrides, stored in the repository state (GitHub) or $FLEET_HOME (local);
       they win over the file. "none" removes an override (the file's value applies again).
       Operational keys only: budgets can only be lowered, models chosen within the file's list,
       coders turned off (not on).

Where an override applies: on GitHub, to the one repository (--repo; default: the origin of the
repository it runs in). In local mode one queue ($FLEET_HOME) serves every repository, so an
override applies to all of them, checked against the .github/fleet.yml of the repository it runs
in (or --repo-path); a setting for one repository only belongs in that repository's file.

Settable keys: ${CONFIG_KEYS.join(", ")}
File-only keys (.github/fleet.yml on the default branch): ${FILE_ONLY_KEYS.join(", ")}

${TARGET_HELP}`;

/** What a `config set` override reaches, in words and as a word for --json. */
export function configScope(target: Target): { scope: "repository" | "local-queue"; text: string } {
  return target.kind === "github"
    ? { scope: "repository", text: `${target.full} (this repository only)` }
    : {
        scope: "local-queue",
        text: `the local queue in ${target.home}: every repository it serves, not only ${target.repoPath}`,
      };
}

/** Whether this front door may run the scheduler: only local dispatch leases need no Actions run. */
export const schedulesLocally = (target: Target, dispatch: string): boolean =>
  target.kind === "local" || dispatch === "local";

export async function configCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, TARGET_OPTIONS, CONFIG_USAGE);
  const [sub, ...rest] = positionals;
  if (sub === "show") {
    if (rest.length)
      throw new UsageError(`fleet config show takes no arguments (got "${rest[0]}").`, CONFIG_USAGE);
    const target = await resolveTarget(values);
    const { doc } = await target.store.read();
    const file = await target.fileConfig();
    const config = await target.config(doc);
    // Stored overrides the file no longer allows are not applied (the app removes them with a notice).
    const { dropped } = resolveOverrides(file.config, doc.config);
    if (values.json) {
      json({
        target: target.full,
        config,
        overrides: doc.config,
        notApplied: dropped,
        fileProblems: file.problems,
      });
      return 0;
    }
    out(`# effective config for ${describeTarget(target)}`);
    out(`# overrides set here apply to ${configScope(target).text}`);
    if (file.problems.length)
      out(
        `# .github/fleet.yml is invalid, defaults are used:\n${file.problems.map((p) => `#   ${p}`).join("\n")}`,
      );
    const keys = Object.keys(doc.config);
    out(
      keys.length
        ? `# overrides: ${keys.map((k) => `${k}=${String(doc.config[k])}`).join(" ")}`
        : "# no overrides",
    );
    for (const d of dropped) out(`# not applied: ${d.key}=${d.value}: ${d.message}`);
    out(stringify(config));
    return 0;
  }
  if (sub === "set") {
    if (rest.length === 0) throw new UsageError("fleet config set needs key=value.", CONFIG_USAGE);
    const parsed = parseConfigAssignments(rest);
    if (!parsed.ok) throw new UsageError(parsed.problems.join("\n"));
    const { assignments } = parsed;
    const twice = assignments.find((a, i) => assignments.findIndex((b) => b.key === a.key) !== i);
    if (twice)
      throw new UsageError(`${twice.key} is assigned more than once; give each key once.`, CONFIG_USAGE);
    const target = await resolveTarget(values);
    const { doc } = await target.store.read();
    const file = await target.fileConfig();
    // Checked against the file and the stored overrides; the write re-checks on the freshest state.
    const check = updateOverrides(file.config, doc.config, assignments);
    if (!check.ok) throw new UsageError(check.problems.map((p) => `${p.path}: ${p.message}`).join("\n"));
    const by = process.env.USER ?? "cli";
    let result = check;
    if (schedulesLocally(target, check.config.dispatch)) {
      // The scheduler runs at once, so a raised cap starts queued tasks now.
      const queue = target.queue(file.config);
      const outcome = await queue.setConfig(assignments, by);
      if (!outcome.ok)
        throw new UsageError(outcome.problems.map((p) => `${p.path}: ${p.message}`).join("\n"));
      result = { ...check, config: outcome.config, dropped: outcome.dropped };
    } else {
      let refused: string | undefined;
      const r = await target.store.update(({ doc: d }) => {
        const set = setConfigOverrides(d, file.config, assignments, by);
        refused = set.outcome.ok
          ? undefined
          : set.outcome.problems.map((p) => `${p.path}: ${p.message}`).join("\n");
        if (set.outcome.ok) result = { ...check, config: set.outcome.config, dropped: set.outcome.dropped };
        return set.result && { doc: set.result.doc, message: set.result.messages.join("\n") };
      });
      if (refused) throw new UsageError(refused);
      if (!r.applied)
        throw new CliError(`Could not write the config to ${describeTarget(target)}; try again.`);
      err("The app applies it at its next scheduling pass.");
    }
    for (const d of result.dropped) err(`dropped the stored override ${d.key}=${d.value}: ${d.message}`);
    const scope = configScope(target);
    if (values.json)
      json({ target: target.full, scope: scope.scope, set: assignments, config: result.config });
    else out(`set ${assignmentsText(assignments)} on ${scope.text}`);
    return 0;
  }
  if (sub === undefined) throw new UsageError("fleet config needs show or set.", CONFIG_USAGE);
  throw new UsageError(`Unknown config command "${sub}": use show or set.`, CONFIG_USAGE);
}
