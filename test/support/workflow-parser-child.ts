// Run by workflow-check.ts as `node --import tsx`: @actions/workflow-parser imports its JSON schemas
// without an import attribute, which node refuses inside vitest's workers and tsx's loader accepts.
import { NoOperationTraceWriter, parseWorkflow } from "@actions/workflow-parser";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const files = JSON.parse(input) as Array<{ name: string; content: string }>;
const errors = files.map((f) =>
  parseWorkflow(f, new NoOperationTraceWriter())
    .context.errors.getErrors()
    .map((e) => e.message),
);
process.stdout.write(JSON.stringify(errors));
