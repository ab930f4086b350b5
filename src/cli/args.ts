import { type ParseArgsConfig, parseArgs } from "node:util";
import { HelpRequested, UsageError } from "./errors.ts";

// node's util.parseArgs rather than a parser package: the commands here are few enough that a table
// per command reads as well as a builder, and it is one dependency fewer.

export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

/** Options every command takes: where the state is and how to print. */
export const TARGET_OPTIONS = {
  repo: { type: "string" },
  "api-url": { type: "string" },
  local: { type: "boolean" },
  home: { type: "string" },
  "repo-path": { type: "string" },
  "work-dir": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies OptionSpec;

export const TARGET_HELP = `Target (all commands):
  --repo owner/name   a GitHub repository (default: from \`git remote get-url origin\`)
  --api-url URL       GitHub API URL (GitHub Enterprise, the offline emulator); or GITHUB_API_URL
  --local             use the local state in $FLEET_HOME (default ~/.fleet) instead of GitHub;
                      also used when no repository can be found
  --home DIR          $FLEET_HOME for this call
  --repo-path DIR     local mode: the git repository (default: cwd); bd create records it as the
                      task's repository, fleet run serves only it
  --work-dir DIR      where worktrees and task artifacts live (default: $FLEET_HOME/work)
  --json              machine-readable output
  -h, --help          this help
Token: GITHUB_TOKEN, else \`gh auth token\` when gh is installed.
Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found.`;

export interface Parsed<T extends OptionSpec> {
  values: {
    [K in keyof T]?: T[K] extends { type: "boolean" }
      ? boolean
      : T[K] extends { multiple: true }
        ? string[]
        : string;
  };
  positionals: string[];
}

/**
 * parseArgs with Fleet's wording: an unknown flag or a missing value is a UsageError with the usage
 * text; `--help` (anywhere) is HelpRequested, which prints the usage.
 */
export function parse<T extends OptionSpec>(argv: string[], options: T, usage: string): Parsed<T> {
  let r: Parsed<T> & { tokens?: Array<{ kind: string; name?: string }> };
  try {
    r = parseArgs({
      args: argv,
      options,
      allowPositionals: true,
      strict: true,
      tokens: true,
    }) as unknown as typeof r;
  } catch (error) {
    const message = (error as Error).message.replace(/^TypeError \[[A-Z_]+\]: /, "");
    throw new UsageError(message.replace(/\. To specify a positional argument.*$/s, "."), usage);
  }
  if ((r.values as { help?: boolean }).help) throw new HelpRequested(usage);
  // parseArgs keeps the last of a repeated single-value option: say so instead of dropping the others.
  const seen = new Set<string>();
  for (const t of r.tokens ?? []) {
    if (t.kind !== "option" || !t.name) continue;
    const spec = options[t.name] as { type: string; multiple?: boolean } | undefined;
    if (spec?.type !== "string" || spec.multiple) continue;
    if (seen.has(t.name)) throw new UsageError(`--${t.name} was given more than once; give it once.`, usage);
    seen.add(t.name);
  }
  return { values: r.values, positionals: r.positionals };
}

/** The one task reference (`fl-a3f` or `#12`) a command takes; a UsageError when it is missing or followed by more. */
export function taskRefArgument(positionals: string[], command: string, usage: string): string {
  const [ref, ...extra] = positionals;
  if (!ref) throw new UsageError(`${command} needs a task id or issue.`, usage);
  if (extra.length) throw new UsageError(`Unexpected argument "${extra[0]}".`, usage);
  return ref;
}
