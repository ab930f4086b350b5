import { execa } from "execa";

/**
 * Each workflow's errors as GitHub's own parser (@actions/workflow-parser: the schema, expressions,
 * keys) reports them; [] for a valid one. Parsed in a child process (see workflow-parser-child.ts).
 */
export async function workflowErrors(files: Array<{ name: string; content: string }>): Promise<string[][]> {
  const r = await execa(process.execPath, ["--import", "tsx", "test/support/workflow-parser-child.ts"], {
    input: JSON.stringify(files),
  });
  return JSON.parse(r.stdout) as string[][];
}
