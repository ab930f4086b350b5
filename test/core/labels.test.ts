import { describe, expect, it } from "vitest";
import {
  fleetLabelDefinitions,
  LABEL_GRAMMAR_HELP,
  parseFleetLabel,
  taskRequestFromLabels,
} from "../../src/core/labels.ts";

const CODERS = ["claude", "codex", "agy"] as const;
const parse = (name: string) => parseFleetLabel(name, CODERS);
const messageOf = (name: string): string => {
  const r = parse(name);
  if (r.kind !== "error") throw new Error(`expected an error for ${name}, got ${r.kind}`);
  expect(r.label).toBe(name);
  return r.message;
};

describe("parseFleetLabel", () => {
  it.each(["bug", "enhancement", "fleet", "fleetclaude", "flee:claude", "", "x fleet:claude"])(
    "%j is not a fleet label",
    (name) => {
      expect(parse(name)).toEqual({ kind: "none" });
    },
  );

  it("reads coder labels", () => {
    expect(parse("fleet:claude")).toEqual({ kind: "coder", coder: "claude" });
    expect(parse("fleet:codex:gpt-5-codex")).toEqual({ kind: "coder", coder: "codex", model: "gpt-5-codex" });
    expect(parse("fleet:agy:gemini-2.5-pro")).toEqual({
      kind: "coder",
      coder: "agy",
      model: "gemini-2.5-pro",
    });
    expect(parse("fleet:claude:openrouter/claude_x")).toEqual({
      kind: "coder",
      coder: "claude",
      model: "openrouter/claude_x",
    });
  });

  it("treats the prefix case-insensitively", () => {
    expect(parse("FLEET:claude")).toEqual({ kind: "coder", coder: "claude" });
    expect(parse("Fleet:P0")).toEqual({ kind: "priority", priority: 0 });
  });

  it("reads priorities p0..p4", () => {
    for (const p of [0, 1, 2, 3, 4]) expect(parse(`fleet:p${p}`)).toEqual({ kind: "priority", priority: p });
  });

  it("reads reserved labels", () => {
    expect(parse("fleet:split")).toEqual({ kind: "split" });
    expect(parse("fleet:split:codex")).toEqual({ kind: "split", coder: "codex" });
    expect(parse("fleet:rebase")).toEqual({ kind: "rebase" });
  });

  it("names the unknown coder and lists the valid forms", () => {
    expect(messageOf("fleet:clade")).toBe(
      'Unknown coder "clade" in label fleet:clade. Use fleet:<coder> or fleet:<coder>:<model> with coder one of: claude, codex, agy.',
    );
    expect(messageOf("fleet:gpt:o3")).toContain('Unknown coder "gpt"');
  });

  it("rejects an empty coder", () => {
    expect(messageOf("fleet:")).toBe(
      "Label fleet: names no coder. Use fleet:<coder> or fleet:<coder>:<model> with coder one of: claude, codex, agy.",
    );
    expect(messageOf("fleet::sonnet")).toContain("names no coder");
  });

  it("rejects an empty model", () => {
    expect(messageOf("fleet:claude:")).toBe(
      'Label fleet:claude: has no model after "claude:". Use fleet:claude for the default model or fleet:claude:<model>.',
    );
  });

  it.each(["fleet:p7", "fleet:p5", "fleet:p01", "fleet:p1:x", "fleet:p-1"])("rejects priority %s", (name) => {
    const r = parse(name);
    if (name === "fleet:p-1") {
      // "p-1" is not a priority shape at all, so it reads as an unknown coder.
      expect(r.kind === "error" && r.message).toContain('Unknown coder "p-1"');
      return;
    }
    expect(messageOf(name)).toBe(
      `Priority label ${name} is not valid. Use fleet:p0 (most urgent) to fleet:p4; the default is p2.`,
    );
  });

  it("tells a maintainer coder names are lowercase", () => {
    expect(messageOf("fleet:Claude")).toMatch(
      /^Coder names are lowercase: use fleet:claude instead of fleet:Claude\./,
    );
    expect(messageOf("fleet:CODEX:o3")).toContain("use fleet:codex:o3 instead of fleet:CODEX:o3");
    expect(messageOf("fleet:split:Agy")).toContain("use fleet:split:agy instead");
    expect(messageOf("fleet:Cl@ude")).toContain('"Cl@ude" in label fleet:Cl@ude is not a coder name');
  });

  it("rejects whitespace", () => {
    expect(messageOf("fleet: claude")).toContain("contains whitespace");
    expect(messageOf("fleet:claude:son net")).toContain("contains whitespace");
  });

  it("rejects too many colons", () => {
    expect(messageOf("fleet:claude:sonnet:4")).toBe(
      'Label fleet:claude:sonnet:4 has too many colons. Use fleet:<coder> or fleet:<coder>:<model> with coder one of: claude, codex, agy. Models cannot contain ":".',
    );
    expect(messageOf("fleet:split:claude:x")).toContain("Use fleet:split or fleet:split:<coder>");
  });

  it.each([
    "fleet:claude:so$net",
    "fleet:claude:-x",
    "fleet:claude:a..b",
    "fleet:claude:`rm`",
    "fleet:claude:a;b",
  ])("rejects model with illegal characters: %s", (name) => {
    expect(messageOf(name)).toContain("has characters a model id cannot contain");
  });

  it("rejects over-long models", () => {
    expect(messageOf(`fleet:claude:${"m".repeat(65)}`)).toContain("longer than 64 characters");
    expect(parse(`fleet:claude:${"m".repeat(64)}`).kind).toBe("coder");
  });

  it("validates the coder of a split label", () => {
    expect(messageOf("fleet:split:clade")).toBe(
      'Unknown coder "clade" in label fleet:split:clade. Use fleet:split or fleet:split:<coder> with coder one of: claude, codex, agy.',
    );
    expect(messageOf("fleet:rebase:now")).toContain("takes no argument");
  });

  it("says when no coders are configured", () => {
    const r = parseFleetLabel("fleet:claude", []);
    expect(r.kind === "error" && r.message).toContain("coder one of: (none configured)");
  });
});

describe("taskRequestFromLabels", () => {
  it("defaults to priority 2 with no fleet labels", () => {
    expect(taskRequestFromLabels(["bug"], CODERS)).toEqual({
      requests: [],
      priority: 2,
      rebase: false,
      errors: [],
    });
  });

  it("turns two coder labels into A/B requests and dedupes repeats", () => {
    const r = taskRequestFromLabels(
      ["fleet:claude", "fleet:codex:o4-mini", "FLEET:claude", "fleet:p1", "fleet:p3", "bug"],
      CODERS,
    );
    expect(r.requests).toEqual([{ coder: "claude" }, { coder: "codex", model: "o4-mini" }]);
    expect(r.priority).toBe(1);
    expect(r.errors).toEqual([]);
  });

  it("collects every error with its label", () => {
    const r = taskRequestFromLabels(["fleet:clade", "fleet:p9", "fleet:agy"], CODERS);
    expect(r.requests).toEqual([{ coder: "agy" }]);
    expect(r.errors.map((e) => e.label)).toEqual(["fleet:clade", "fleet:p9"]);
  });

  it("reports split and rebase", () => {
    const r = taskRequestFromLabels(["fleet:split", "fleet:split:codex", "fleet:rebase"], CODERS);
    expect(r.split).toEqual({ coder: "codex" });
    expect(r.rebase).toBe(true);
  });
});

describe("fleetLabelDefinitions / help", () => {
  it("defines one label per coder, five priorities and the reserved ones", () => {
    const defs = fleetLabelDefinitions(CODERS);
    expect(defs.map((d) => d.name)).toEqual([
      "fleet:claude",
      "fleet:codex",
      "fleet:agy",
      "fleet:p0",
      "fleet:p1",
      "fleet:p2",
      "fleet:p3",
      "fleet:p4",
      "fleet:split",
      "fleet:rebase",
    ]);
    for (const d of defs) {
      expect(d.color).toMatch(/^[0-9a-f]{6}$/);
      expect(d.description.length).toBeLessThanOrEqual(100);
      expect(d.name.length).toBeLessThanOrEqual(50);
      // every defined label must read back as a valid fleet label
      expect(parse(d.name).kind).not.toBe("error");
    }
  });

  it("help text covers every form", () => {
    for (const form of [
      "fleet:<coder>",
      "fleet:<coder>:<model>",
      "fleet:p0",
      "fleet:p4",
      "fleet:split",
      "fleet:rebase",
    ]) {
      expect(LABEL_GRAMMAR_HELP).toContain(form);
    }
  });
});
