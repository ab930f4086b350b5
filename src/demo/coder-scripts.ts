import type { ScriptServer, ScriptTurn, ScriptUsage } from "@fleet/model-servers";
import {
  startAnthropicScriptServer,
  startGeminiScriptServer,
  startOpenAIScriptServer,
} from "@fleet/model-servers";
import { CODERS, type CoderName } from "../core/coders.ts";

/** The coders the demo can run: those whose real CLI installs with the project (agy does not). */
export const DEMO_CODERS = ["claude", "codex", "gemini", "opencode"] as const;
export type DemoCoder = (typeof DEMO_CODERS)[number];

export const isDemoCoder = (name: string): name is DemoCoder =>
  (DEMO_CODERS as readonly string[]).includes(name);

/** One coder in the demo: the model its repository names, its model API's scripted server, its shell tool. */
export interface DemoCoderSetup {
  coder: DemoCoder;
  displayName: string;
  model: string;
  /** The variable the demo's credential is named for (the repository's default credential). */
  credential: string;
  startModel(): Promise<ScriptServer>;
  /** The model of `--review`: one read-only turn that answers with the review. */
  startReviewModel(): Promise<ScriptServer>;
}

/** The file of the demo's human pull request, before and after its change. */
export const REVIEWED_FILE = "src/sum.js";
export const REVIEWED_BEFORE =
  "// Sums a list of numbers.\nexport function sum(xs) {\n  let total = 0;\n  for (const x of xs) total += x;\n  return total;\n}\n";
export const REVIEWED_AFTER =
  "// Sums a list of numbers.\nexport function sum(xs) {\n  let total = 0;\n  for (let i = 1; i < xs.length; i++) total += xs[i];\n  return total;\n}\n";

/** What the scripted reviewer says: a finding on the changed line (4), one on a line the diff does not show. */
const REVIEW = JSON.stringify({
  summary: "The loop skips the first element, so `sum([5])` is 0. The old `for...of` was right.",
  comments: [
    {
      path: REVIEWED_FILE,
      line: 4,
      body: "Starts at 1: `xs[0]` is never added. Start at 0, or keep `for (const x of xs)`.",
    },
    { path: REVIEWED_FILE, line: 1, body: "Say what an empty list gives (0)." },
  ],
});
const reviewScript = (usage: ScriptUsage): ScriptTurn[] => [
  { text: `Reviewed the change.\n\n\`\`\`json\n${REVIEW}\n\`\`\``, usage },
];

// Each turn's figures, as Anthropic counts them (input without the cache).
const INPUT = 2_150;
const OUTPUT = 140;
const CACHE_READ = 9_800;
const CACHE_WRITE = 1_200;

const RESULT = JSON.stringify({
  status: "done",
  summary: "Added CHANGELOG.md with an Unreleased section, as the issue asks.",
  testsRun: ["cat CHANGELOG.md: ok"],
  followUps: [],
});
/** The change: CHANGELOG.md in the worktree, RESULT.json in the task's notes folder beside it. */
const COMMAND = `printf '# Changelog\\n\\n## Unreleased\\n\\n- Nothing yet.\\n' > CHANGELOG.md && for d in ../.fleet-task-*; do echo '${RESULT}' > "$d/RESULT.json"; done`;

/** Each coder's shell tool as its CLI declares it, with the command. */
const SHELL_CALL: Record<DemoCoder, { name: string; input: unknown }> = {
  claude: { name: "Bash", input: { command: COMMAND, description: "Write CHANGELOG.md and the result" } },
  // Codex offers `exec_command` ({cmd, workdir}) with -m o4-mini.
  codex: { name: "exec_command", input: { cmd: COMMAND, workdir: "." } },
  gemini: { name: "run_shell_command", input: { command: COMMAND, description: "Write CHANGELOG.md" } },
  opencode: { name: "bash", input: { command: COMMAND, description: "Write CHANGELOG.md and the result" } },
};

/** Claude keeps a to-do list as it works (the tracking comment's checklist); the others' scripts do not. */
const TODO: Record<
  DemoCoder,
  { before: ScriptTurn["toolUses"] & object; after: ScriptTurn["toolUses"] & object }
> = {
  claude: {
    before: [
      {
        name: "TaskCreate",
        input: { subject: "Create CHANGELOG.md with an Unreleased section", description: "-" },
      },
      { name: "TaskCreate", input: { subject: "Record the result", description: "-" } },
    ],
    after: [
      { name: "TaskUpdate", input: { taskId: "1", status: "completed" } },
      { name: "TaskUpdate", input: { taskId: "2", status: "completed" } },
    ],
  },
  codex: { before: [], after: [] },
  gemini: { before: [], after: [] },
  opencode: { before: [], after: [] },
};

/** The scripted model's turns: a plan, then the shell call that makes the change, then a summary. */
function demoScript(coder: DemoCoder, usage: ScriptUsage): ScriptTurn[] {
  return [
    {
      text: "1. Create CHANGELOG.md with a title and an Unreleased section.\n2. Record the result.",
      usage,
    },
    {
      text: "Creating the changelog.",
      toolUses: [...TODO[coder].before, SHELL_CALL[coder], ...TODO[coder].after],
      usage,
    },
    { text: "CHANGELOG.md is in place.", usage },
  ];
}

const ANTHROPIC_USAGE: ScriptUsage = {
  input_tokens: INPUT,
  output_tokens: OUTPUT,
  cache_read_input_tokens: CACHE_READ,
  cache_creation_input_tokens: CACHE_WRITE,
};
// The OpenAI Responses and Gemini APIs count the cached prompt inside input_tokens and write no cache.
const INCLUSIVE_USAGE: ScriptUsage = {
  input_tokens: INPUT + CACHE_READ,
  output_tokens: OUTPUT,
  cache_read_input_tokens: CACHE_READ,
};

/** What the demo's three turns add up to for a coder, in Fleet's terms. */
export function demoTokens(coder: DemoCoder) {
  const cacheWrite = coder === "claude" || coder === "opencode" ? 3 * CACHE_WRITE : 0;
  return { input: 3 * INPUT, output: 3 * OUTPUT, cacheRead: 3 * CACHE_READ, cacheWrite };
}

export function demoCoder(coder: DemoCoder): DemoCoderSetup {
  const facts = CODERS[coder as CoderName];
  const base = { coder, displayName: facts.displayName, credential: facts.credential.env };
  switch (coder) {
    case "codex":
      return {
        ...base,
        model: "o4-mini",
        startModel: () => startOpenAIScriptServer({ turns: demoScript(coder, INCLUSIVE_USAGE) }),
        startReviewModel: () => startOpenAIScriptServer({ turns: reviewScript(INCLUSIVE_USAGE) }),
      };
    case "gemini":
      return {
        ...base,
        model: facts.defaultModel,
        startModel: () => startGeminiScriptServer({ turns: demoScript(coder, INCLUSIVE_USAGE) }),
        startReviewModel: () => startGeminiScriptServer({ turns: reviewScript(INCLUSIVE_USAGE) }),
      };
    default:
      return {
        ...base,
        model: facts.defaultModel,
        startModel: () => startAnthropicScriptServer({ turns: demoScript(coder, ANTHROPIC_USAGE) }),
        startReviewModel: () => startAnthropicScriptServer({ turns: reviewScript(ANTHROPIC_USAGE) }),
      };
  }
}
