import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const action = parse(readFileSync("action.yml", "utf8")) as {
  inputs: Record<string, { required?: boolean; default?: string }>;
  outputs: Record<string, unknown>;
  runs: { using: string; main: string };
};
const code = readdirSync("src/action")
  .filter((f) => f.endsWith(".ts"))
  .map((f) => readFileSync(join("src/action", f), "utf8"))
  .join("\n");
const calls = (fn: string) =>
  new Set([...code.matchAll(new RegExp(`${fn}\\(\\s*"([a-z0-9-]+)"`, "g"))].map((m) => m[1]!));

describe("action.yml", () => {
  it("runs dist/index.js on node24 (Node 20 is gone from Actions runners)", () => {
    expect(action.runs).toEqual({ using: "node24", main: "dist/index.js" });
  });

  it("declares every input the code reads, and the code reads every declared input", () => {
    const read = calls("core.getInput");
    expect([...read].sort()).toEqual(Object.keys(action.inputs).sort());
    expect(action.inputs["task-id"]?.required).toBe(true);
    // The app's token comes from the OIDC exchange at fleet-url; a token of one's own is optional.
    expect(action.inputs["github-token"]?.required).toBe(false);
    expect(action.inputs["fleet-url"]?.required).toBe(false);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: an Actions expression, not a JS template
    expect(action.inputs["api-url"]?.default).toBe("${{ github.api_url }}");
  });

  it("declares every output the code sets, and the code sets every declared output", () => {
    const set = calls("core.setOutput");
    expect([...set].sort()).toEqual(Object.keys(action.outputs).sort());
  });
});
