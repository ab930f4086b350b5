import type { FleetConfig } from "./config.ts";

// What `fleet init` does with each file, and what it says is left to do: decided here from what it
// found, so the command only reads, writes and prints.

/** What happens to one file: written new, already Fleet's, someone's own kept, or replaced (--force). */
export type FileAction = "create" | "unchanged" | "keep" | "overwrite";

export function fileAction(existing: string | undefined, wanted: string, force: boolean): FileAction {
  if (existing === undefined) return "create";
  if (existing === wanted) return "unchanged";
  return force ? "overwrite" : "keep";
}

/** Whether the action writes the file. */
export const writes = (a: FileAction): boolean => a === "create" || a === "overwrite";

const WORDS: Record<FileAction, [done: string, dry: string]> = {
  create: ["created", "would create"],
  unchanged: ["unchanged", "unchanged"],
  keep: [
    "kept (it differs from Fleet's; --force replaces it)",
    "would keep (it differs from Fleet's; --force replaces it)",
  ],
  overwrite: ["replaced (--force)", "would replace (--force)"],
};

export const fileActionWords = (a: FileAction, dryRun: boolean): string => WORDS[a][dryRun ? 1 : 0];

/**
 * The secrets a repository's runs can use, grouped by name: each enabled coder's credential names
 * (`coders.<coder>.credentials`), e.g. `ANTHROPIC_API_KEY` for claude and opencode.
 */
export function credentialSecrets(
  config: Pick<FleetConfig, "coders">,
): Array<{ name: string; coders: string[] }> {
  const byName = new Map<string, string[]>();
  for (const [coder, c] of Object.entries(config.coders)) {
    if (!c.enabled) continue;
    for (const name of c.credentials) byName.set(name, [...(byName.get(name) ?? []), coder]);
  }
  return [...byName].map(([name, coders]) => ({ name, coders }));
}

export interface LeftToDo {
  repo?: string;
  config: Pick<FleetConfig, "coders" | "dispatch" | "runner_labels" | "workflow">;
  /** Paths written now (to commit and push). */
  written: string[];
  /** Secret names the task workflow hands the action (its `credentials` input). */
  workflowSecrets: readonly string[];
  /** Why the labels were not created, when they were not. */
  labelsSkipped?: string;
}

/** What a person still has to do after `fleet init`, in order, one line each. */
export function leftToDo(o: LeftToDo): string[] {
  const repo = o.repo ?? "owner/name";
  const here = o.repo ?? "the repository";
  const left: string[] = [];
  if (o.written.length)
    left.push(
      `Commit and push to the default branch: git add ${o.written.join(" ")} && git commit -m "Set up Fleet" && git push`,
    );
  if (o.labelsSkipped) left.push(`Create the fleet labels: ${o.labelsSkipped}`);
  left.push(
    `Install the Fleet GitHub App on ${here}; on the app's host, \`fleet doctor\` checks its credentials, FLEET_PUBLIC_URL and the installation.`,
  );
  const secrets = credentialSecrets(o.config);
  const said = secrets.map((s) => `${s.name} (${s.coders.join(", ")})`).join(", ");
  if (o.config.dispatch === "local") {
    left.push(
      `Start a worker: \`fleet run --repo ${repo}\` on a machine with git, bubblewrap and the coders' CLIs, with the coders' credentials in its environment: ${said}.`,
    );
    return left;
  }
  left.push(
    `Add the model credentials as Actions secrets (Settings -> Secrets and variables -> Actions), at least one coder's: ${said}; e.g. \`gh secret set ANTHROPIC_API_KEY --repo ${repo}\`.`,
  );
  const missing = secrets.filter((s) => !o.workflowSecrets.includes(s.name)).map((s) => s.name);
  if (missing.length)
    left.push(
      `Hand ${missing.join(", ")} to the action too: add \`NAME=\${{ secrets.NAME }}\` lines for ${missing.length === 1 ? "it" : "them"} to the credentials input of .github/workflows/${o.config.workflow}.`,
    );
  left.push(
    `Register self-hosted runners (Actions Runner 2.327.1 or later) with the labels ${o.config.runner_labels.join(", ")} (runner_labels), with git, bubblewrap and the coders' CLIs; see docs/deploy.md.`,
  );
  return left;
}
