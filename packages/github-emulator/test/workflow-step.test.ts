import { describe, expect, it } from "vitest";
import { actionMain, evaluateExpressions, workflowActionStep } from "../src/runner/run-action-job.ts";

const WORKFLOW = `name: task
on:
  workflow_dispatch:
    inputs:
      task_id: { type: string, required: true }
      labels: { type: string, default: '["self-hosted"]' }
permissions:
  contents: read
  id-token: write
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
  task:
    runs-on: \${{ fromJSON(inputs.labels) }}
    steps:
      - run: echo hi
      - id: act
        uses: acme/tool@v1
        with:
          id: \${{ inputs.task_id }}
          keys: |
            A=\${{ secrets.A }}
            B=\${{ secrets.B }}
`;
const ACTION = `name: tool
inputs:
  id: { required: true }
  api: { default: "\${{ github.api_url }}" }
  mode: { default: fast }
runs:
  using: node24
  main: dist/index.js
`;

describe("the emulated runner reads an action's step from the workflow", () => {
  it("evaluates the step's inputs for the run, adds the action's defaults, and reads the job's permissions", () => {
    const step = workflowActionStep({
      workflow: WORKFLOW,
      match: (uses) => uses.endsWith("/tool@v1"),
      runInputs: { task_id: "fl-1" },
      secrets: { A: "secret-a" },
      github: { api_url: "http://127.0.0.1:1" },
      actionYml: ACTION,
    });
    expect(step).toEqual({
      job: "task",
      uses: "acme/tool@v1",
      // A secret the repository lacks is empty, as on GitHub.
      inputs: { id: "fl-1", keys: "A=secret-a\nB=\n", api: "http://127.0.0.1:1", mode: "fast" },
      permissions: { contents: "read" },
      idToken: true,
    });
    expect(actionMain(ACTION)).toBe("dist/index.js");
  });

  it("refuses what it cannot follow: no matching step, two of them, an expression beyond a property", () => {
    const run = { runInputs: {}, actionYml: ACTION };
    expect(() => workflowActionStep({ ...run, workflow: WORKFLOW, match: (u) => u === "x/y@v1" })).toThrow(
      /has 0 steps using the action/,
    );
    expect(() => workflowActionStep({ ...run, workflow: WORKFLOW, match: () => true })).toThrow(
      /has 2 steps/,
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: an Actions expression, not a JS template
    expect(() => evaluateExpressions("${{ toJSON(inputs) }}", { inputs: {} })).toThrow(
      /context properties only/,
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: an Actions expression, not a JS template
    expect(() => evaluateExpressions("${{ env.X }}", { inputs: {} })).toThrow(/no `env` context/);
    expect(() => actionMain("runs: { using: docker, image: Dockerfile }\n")).toThrow(
      /not a JavaScript action/,
    );
  });
});
