import { stringify } from "yaml";
import { applyOverrides, CONFIG_KEYS, type ConfigValue, parseConfigAssignment } from "../../core/config.ts";
import { localDispatcher } from "../../queue/dispatcher.ts";
import { createRepoQueue } from "../../queue/repo-queue.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { CliError, UsageError } from "../errors.ts";
import { err, json, out } from "../io.ts";
import { describeTarget, resolveTarget, type Target } from "../target.ts";

export const CONFIG_USAGE = `Usage: fleet config show [--json]
       fleet config set key=value [key=value ...]

show   the effective config: .github/fleet.yml (or defaults) with the overrides set here
set    validated overrides, stored in the repository state (GitHub) or $FLEET_HOME (local);
       they win over the file. "none" removes an optional setting.

Settable keys: ${CONFIG_KEYS.join(", ")}

${TARGET_HELP}`;

/** Whether this front door may run the scheduler: only local dispatch leases need no Actions run. */
export const schedulesLocally = (target: Target, dispatch: string): boolean =>
  target.kind === "local" || dispatch === "local";

export async function configCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, TARGET_OPTIONS, CONFIG_USAGE);
  if (values.help) {
    out(CONFIG_USAGE);
    return 0;
  }
  const [sub, ...rest] = positionals;
  if (sub === "show") {
    if (rest.length)
      throw new UsageError(`fleet config show takes no arguments (got "${rest[0]}").`, CONFIG_USAGE);
    const target = await resolveTarget(values);
    const { doc } = await target.store.read();
    const file = await target.fileConfig();
    const config = await target.config(doc);
    if (values.json) {
      json({ target: target.full, config, overrides: doc.config, fileProblems: file.problems });
      return 0;
    }
    out(`# effective config for ${describeTarget(target)}`);
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
    out(stringify(config));
    return 0;
  }
  if (sub === "set") {
    if (rest.length === 0) throw new UsageError("fleet config set needs key=value.", CONFIG_USAGE);
    const assignments: Array<{ key: string; value: ConfigValue }> = [];
    const problems: string[] = [];
    for (const text of rest) {
      const a = parseConfigAssignment(text);
      if (a.ok) assignments.push({ key: a.key, value: a.value });
      else problems.push(a.message);
    }
    if (problems.length) throw new UsageError(problems.join("\n"));
    const target = await resolveTarget(values);
    const { doc } = await target.store.read();
    const file = await target.fileConfig();
    // The whole config must stay valid (e.g. default_coder must name an enabled coder).
    const merged: Record<string, string> = {};
    for (const [k, v] of Object.entries(doc.config)) if (v !== null && v !== undefined) merged[k] = String(v);
    for (const a of assignments) {
      if (a.value === null) delete merged[a.key];
      else merged[a.key] = Array.isArray(a.value) ? a.value.join(",") : String(a.value);
    }
    const check = applyOverrides(file.config, merged);
    if (!check.ok) throw new UsageError(check.problems.map((p) => `${p.path}: ${p.message}`).join("\n"));
    const by = process.env.USER ?? "cli";
    if (schedulesLocally(target, check.config.dispatch)) {
      // The scheduler runs at once, so a raised cap starts queued tasks now.
      const queue = createRepoQueue({
        repo: target.full,
        store: target.store,
        fileConfig: file.config,
        dispatcher: localDispatcher,
      });
      await queue.setConfig(assignments, by);
    } else {
      const r = await target.store.update(({ doc: d }) => {
        const next = { ...d, config: { ...d.config } };
        for (const a of assignments) {
          if (a.value === null) delete next.config[a.key];
          else next.config[a.key] = a.value;
        }
        return { doc: next, message: `config set ${rest.join(" ")} (by ${by})` };
      });
      if (!r.applied)
        throw new CliError(`Could not write the config to ${describeTarget(target)}; try again.`);
      err("The app applies it at its next scheduling pass.");
    }
    if (values.json) json({ target: target.full, set: assignments, config: check.config });
    else
      out(
        `set ${assignments.map((a) => `${a.key}=${a.value === null ? "none" : String(a.value)}`).join(" ")} on ${target.full}`,
      );
    return 0;
  }
  if (sub === undefined) throw new UsageError("fleet config needs show or set.", CONFIG_USAGE);
  throw new UsageError(`Unknown config command "${sub}": use show or set.`, CONFIG_USAGE);
}
