import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { defaultFleetConfig, parseFleetConfig } from "../../src/core/config.ts";
import { SETTABLE_KEYS } from "../../src/core/config-fields.ts";
import { fleetYmlTemplate } from "../../src/core/config-template.ts";
import { credentialSecrets, fileAction, leftToDo } from "../../src/core/init-plan.ts";
import {
  DEFAULT_ACTION_OWNER,
  defaultActionOwner,
  isFleetAction,
  ownerFromRepositoryField,
  TASK_WORKFLOW_PATH,
  taskWorkflowFor,
  templateActionOwner,
  workflowCredentialNames,
} from "../../src/core/task-workflow.ts";
import { workflowErrors } from "../support/workflow-check.ts";

const template = readFileSync(TASK_WORKFLOW_PATH, "utf8");
const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { repository?: unknown };

describe("the task workflow template (this repository's own fleet-task.yml)", () => {
  it("runs the published action by name, owned by package.json's repository owner (else fleet-dev); no checkout", async () => {
    expect(templateActionOwner(template)).toBe(defaultActionOwner(pkg));
    expect(template).not.toMatch(/actions\/checkout|sparse-checkout|uses: \.\//);
    const acme = taskWorkflowFor(template, "acme-corp");
    // GitHub's parser finds nothing wrong, in the template or rendered for another owner.
    expect(
      await workflowErrors([
        { name: TASK_WORKFLOW_PATH, content: template },
        { name: "acme.yml", content: acme },
      ]),
    ).toEqual([[], []]);
    // A mistake is caught by it (the check can fail).
    expect(
      (await workflowErrors([{ name: "bad.yml", content: template.replace("steps:", "stepz:") }]))[0],
    ).not.toEqual([]);
    const w = parse(template) as {
      permissions: Record<string, string>;
      on: { workflow_dispatch: { inputs: Record<string, unknown> } };
      jobs: { task: { steps: Array<{ uses?: string; with?: Record<string, string> }> } };
    };
    expect(w.permissions).toEqual({ contents: "read", "id-token": "write" });
    expect(Object.keys(w.on.workflow_dispatch.inputs).sort()).toEqual([
      "correlation_id",
      "fleet_url",
      "runner_labels",
      "task_id",
    ]);
    const fleet = w.jobs.task.steps.filter((s) => s.uses && isFleetAction(s.uses));
    expect(fleet).toHaveLength(1);
    // The inputs it hands the action are ones action.yml declares.
    const action = parse(readFileSync("action.yml", "utf8")) as { inputs: Record<string, unknown> };
    for (const input of Object.keys(fleet[0]!.with ?? {}))
      expect(Object.keys(action.inputs)).toContain(input);
  });

  it("is rendered for another owner by changing that one line only", () => {
    const acme = taskWorkflowFor(template, "acme-corp");
    expect(templateActionOwner(acme)).toBe("acme-corp");
    expect(acme.split("\n").filter((l, i) => l !== template.split("\n")[i])).toEqual([
      "        uses: acme-corp/fleet@v1",
    ]);
    expect(() => taskWorkflowFor(template, "not/an owner")).toThrow(/not a GitHub account name/);
    expect(() => taskWorkflowFor("jobs: {}\n", "acme")).toThrow(/exactly one step/);
  });

  it("the owner from package.json's repository field, in its spellings", () => {
    expect(defaultActionOwner({})).toBe(DEFAULT_ACTION_OWNER);
    for (const field of [
      "github:acme/fleet",
      "acme/fleet",
      "https://github.com/acme/fleet",
      "git+https://github.com/acme/fleet.git",
      "git@github.com:acme/fleet.git",
      { type: "git", url: "https://github.com/acme/fleet.git" },
    ])
      expect(ownerFromRepositoryField(field), JSON.stringify(field)).toBe("acme");
    expect(ownerFromRepositoryField("https://gitlab.com/acme/fleet")).toBeUndefined();
  });

  it("names the secrets it hands the action", () => {
    expect(workflowCredentialNames(template)).toEqual([
      "ANTHROPIC_API_KEY",
      "CLAUDE_CODE_OAUTH_TOKEN",
      "OPENAI_API_KEY",
      "GEMINI_API_KEY",
    ]);
    // Every default credential of every coder reaches a run.
    for (const { name } of credentialSecrets(defaultFleetConfig()))
      expect(workflowCredentialNames(template)).toContain(name);
  });
});

describe(".github/fleet.yml as fleet init writes it", () => {
  const text = fleetYmlTemplate();

  it("is the defaults: as written (all commented) and with every valued line uncommented", () => {
    const asWritten = parseFleetConfig(parse(text) ?? {});
    expect(asWritten.ok && asWritten.config).toEqual(defaultFleetConfig());
    // Uncomment every key line but those of keys with no default (nothing to uncomment there).
    const uncommented = text
      .split("\n")
      .map((l) => (/^# +[a-z_]+:/.test(l) && !l.includes("# not set by default") ? l.slice(2) : l))
      .join("\n");
    expect(uncommented).toMatch(/^max_concurrent: 3 {2}#/m);
    expect(uncommented).toMatch(/^ {4}credentials: \[ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN\]/m);
    const r = parseFleetConfig(parse(uncommented));
    expect(r.ok ? r.config : r.problems).toEqual(defaultFleetConfig());
  });

  it("shows every key of the table, and says which are file-only", () => {
    for (const { pattern } of SETTABLE_KEYS) {
      const leaf = pattern.split(".").at(-1)!;
      expect(text, pattern).toMatch(new RegExp(`^# +${leaf}:`, "m"));
    }
    expect(text).toMatch(/^# dispatch: actions {2}# one of: actions, local; file-only: /m);
  });
});

describe("fleet init's plan", () => {
  it("creates what is missing, leaves Fleet's own, keeps a changed file unless forced", () => {
    expect(fileAction(undefined, "a", false)).toBe("create");
    expect(fileAction("a", "a", true)).toBe("unchanged");
    expect(fileAction("b", "a", false)).toBe("keep");
    expect(fileAction("b", "a", true)).toBe("overwrite");
  });

  it("says what is left: push, the app, the secrets (and any the workflow does not pass), the runners", () => {
    const config = defaultFleetConfig();
    config.coders.claude!.credentials = ["ANTHROPIC_API_KEY", "TEAM_CLAUDE_KEY"];
    const left = leftToDo({
      repo: "acme/widgets",
      config,
      written: [".github/fleet.yml"],
      workflowSecrets: workflowCredentialNames(template),
    });
    expect(left[0]).toBe(
      'Commit and push to the default branch: git add .github/fleet.yml && git commit -m "Set up Fleet" && git push',
    );
    expect(left.join("\n")).toMatch(/Install the Fleet GitHub App on acme\/widgets/);
    expect(left.join("\n")).toMatch(/ANTHROPIC_API_KEY \(claude, opencode\), TEAM_CLAUDE_KEY \(claude\)/);
    expect(left.join("\n")).toMatch(/Hand TEAM_CLAUDE_KEY to the action too/);
    expect(left.at(-1)).toMatch(/self-hosted runners .* with the labels self-hosted, fleet/);
    const local = leftToDo({
      config: { ...defaultFleetConfig(), dispatch: "local" },
      written: [],
      workflowSecrets: [],
      labelsSkipped: "no token",
    });
    expect(local).toEqual([
      "Create the fleet labels: no token",
      expect.stringMatching(/^Install the Fleet GitHub App on the repository/),
      expect.stringMatching(/^Start a worker: `fleet run --repo owner\/name`/),
    ]);
  });
});
