import { describe, expect, it } from "vitest";
import {
  CODER_CREDENTIAL_VARIABLES,
  CODER_NAMES,
  CODERS,
  coderFacts,
  isKnownCoder,
} from "../../src/core/coders.ts";
import {
  DEFAULT_CODERS,
  defaultFleetConfig,
  isDefaultModel,
  modelFor,
  NO_MODEL,
  parseFleetConfig,
} from "../../src/core/config.ts";
import { scheduleNext } from "../../src/core/scheduler.ts";
import { newTask } from "../../src/core/task.ts";

describe("the coder registry", () => {
  it("names every coder once, in label order", () => {
    expect(CODER_NAMES).toEqual(["claude", "codex", "agy", "gemini", "opencode"]);
    for (const name of CODER_NAMES) expect(CODERS[name].name).toBe(name);
    expect(isKnownCoder("gemini")).toBe(true);
    expect(isKnownCoder("toString")).toBe(false);
    expect(coderFacts("nope")).toBeUndefined();
    expect(coderFacts("codex")?.binary).toBe("codex");
  });

  it("lists each coder's default credentials among the variables its CLI reads", () => {
    for (const c of Object.values(CODERS)) {
      const reads = [c.credential.env, ...c.credential.aliases];
      for (const name of c.credential.defaults) expect(reads, c.name).toContain(name);
    }
    expect(CODER_CREDENTIAL_VARIABLES).toEqual(
      expect.arrayContaining([
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
      ]),
    );
    expect(new Set(CODER_CREDENTIAL_VARIABLES).size).toBe(CODER_CREDENTIAL_VARIABLES.length);
  });

  it("is where the config's built-in coders come from, gemini included", () => {
    expect(Object.keys(DEFAULT_CODERS)).toEqual([...CODER_NAMES]);
    for (const c of Object.values(CODERS)) {
      expect(DEFAULT_CODERS[c.name]).toEqual({
        model: c.defaultModel,
        credentials: [...c.credential.defaults],
        enabled: true,
      });
    }
    const config = defaultFleetConfig();
    expect(config.coders.gemini).toEqual({
      model: "gemini-2.5-pro",
      credentials: ["GEMINI_API_KEY"],
      enabled: true,
    });
  });

  it("lets fleet:gemini run with the defaults instead of holding it as not configured", () => {
    const now = "2025-01-01T00:00:00Z";
    const task = newTask({ id: "fl-1", repo: "o/r", issue: 1, title: "t", coder: "gemini", model: "x", now });
    expect(scheduleNext({ tasks: [task], config: defaultFleetConfig(), now })).toEqual([
      { kind: "dispatch", taskId: "fl-1", slot: 1 },
    ]);
  });
});

describe("the model a task runs", () => {
  const config = defaultFleetConfig();

  it("is the label's model, else the coder's configured one, else the unconfigured marker", () => {
    expect(modelFor(config, "claude", "opus")).toBe("opus");
    expect(modelFor(config, "claude")).toBe("sonnet");
    expect(modelFor(config, "codex", undefined)).toBe("gpt-5-codex");
    expect(modelFor(config, "ghost")).toBe(NO_MODEL);
    const custom = parseFleetConfig({ coders: { claude: { model: "opus" } } });
    expect(custom.ok && modelFor(custom.config, "claude")).toBe("opus");
  });

  it("need not be named on a label when it is the coder's default", () => {
    expect(isDefaultModel(config, "claude", "sonnet")).toBe(true);
    expect(isDefaultModel(config, "claude", undefined)).toBe(true);
    expect(isDefaultModel(config, "claude", "")).toBe(true);
    expect(isDefaultModel(config, "ghost", NO_MODEL)).toBe(true);
    expect(isDefaultModel(config, "claude", "opus")).toBe(false);
    expect(isDefaultModel(config, "ghost", "opus")).toBe(false);
  });
});
