import { HttpError } from "./http-error.ts";
import type { Repo, Ruleset } from "./state.ts";

/**
 * Branch rulesets, as far as the emulator models them
 * (https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets):
 * "Require a pull request before merging" on the branches a ruleset targets refuses a direct update
 * (a push, a ref moved or a file written by REST) from anyone not in its bypass list; merging a pull
 * request is the way in. Creating or deleting a targeted branch, required approvals and the other
 * rules are not modelled. Refusals carry GitHub's words: a push reports "GH013: Repository rule
 * violations found for <ref>." with one "- <rule>" line each, REST answers 422 "Repository rule
 * violations found".
 */
const RULE_MESSAGES: Record<Ruleset["rules"][number], string> = {
  pull_request: "Changes must be made through a pull request.",
};

/** A ruleset's target as a pattern over full ref names (`*` any run of characters, `?` one). */
function refPattern(repo: Repo, target: string): string {
  if (target === "~DEFAULT_BRANCH") return `refs/heads/${repo.defaultBranch}`;
  if (target === "~ALL") return "refs/heads/*";
  return target;
}

function matches(pattern: string, ref: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${re}$`).test(ref);
}

/** The rulesets that hold `login` (those without it in their bypass list). */
const holding = (repo: Repo, login: string): Ruleset[] =>
  repo.rulesets.filter((r) => !r.bypass.has(login.toLowerCase()));

/** The pre-receive hook's GH_EMULATOR_RULES for a push by `login`: "<ref pattern>\t<message>" lines. */
export function hookRules(repo: Repo, login: string): string {
  const lines: string[] = [];
  for (const r of holding(repo, login))
    for (const target of r.include)
      for (const rule of r.rules) lines.push(`${refPattern(repo, target)}\t${RULE_MESSAGES[rule]}`);
  return lines.join("\n");
}

/** Refuses a direct REST update of the branch `ref` by `login` that a ruleset forbids (422, GitHub's message). */
export function checkRulesets(repo: Repo, login: string, ref: string, documentationUrl: string): void {
  const broken = new Set<string>();
  for (const r of holding(repo, login))
    if (r.include.some((t) => matches(refPattern(repo, t), ref)))
      for (const rule of r.rules) broken.add(RULE_MESSAGES[rule]);
  if (broken.size === 0) return;
  throw new HttpError(422, `Repository rule violations found\n\n${[...broken].join("\n\n")}\n\n`, {
    documentation_url: documentationUrl,
  });
}
