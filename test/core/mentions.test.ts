// `@<app> ...` comments: what counts as a mention of the app, the text it asks for, and a coder prefix.
import { describe, expect, it } from "vitest";
import { parseMention } from "../../src/core/mentions.ts";

const CODERS = ["claude", "codex", "gemini"];
const parse = (body: string, handle = "fleet") => parseMention(body, handle, CODERS);

describe("@fleet mentions", () => {
  it("the text after the mention (and the lines below it) is the request", () => {
    expect(parse("@fleet please add a changelog entry")).toEqual({
      kind: "request",
      text: "please add a changelog entry",
    });
    expect(parse("Hey @Fleet, could you\n\nalso update the docs?")).toEqual({
      kind: "request",
      text: "could you\n\nalso update the docs?",
    });
    expect(parse("Add a changelog entry @fleet")).toEqual({ kind: "request", text: "Add a changelog entry" });
  });

  it("a fleet:<coder>[:<model>] prefix names the coder and model", () => {
    expect(parse("@fleet fleet:codex:gpt-5-codex write the tests")).toEqual({
      kind: "request",
      text: "write the tests",
      coder: "codex",
      model: "gpt-5-codex",
    });
    expect(parse("@fleet fleet:gemini fix it")).toMatchObject({ coder: "gemini", text: "fix it" });
  });

  it("a bad prefix or nothing to do is an error that says what to write", () => {
    const bad = parse("@fleet fleet:cluade fix it");
    expect(bad.kind).toBe("error");
    expect(bad.kind === "error" && bad.message).toContain('Unknown coder "cluade"');
    const empty = parse("@fleet");
    expect(empty.kind === "error" && empty.message).toContain("Say what to do after @fleet");
    expect(parse("@fleet fleet:split do it").kind).toBe("error");
  });

  it("quotes, code, other handles, words and e-mail addresses are not mentions", () => {
    for (const body of [
      "> @fleet do this",
      "```\n@fleet do this\n```",
      "see `@fleet do this`",
      "@fleetwood do this",
      "@fleet-bot do this",
      "mail ops@fleet.dev",
      "no mention here",
      "@octocat do this",
    ])
      expect(parse(body), body).toEqual({ kind: "none" });
  });

  it("the handle is the app's slug", () => {
    expect(parse("@acme-agents fix the build", "acme-agents")).toEqual({
      kind: "request",
      text: "fix the build",
    });
    expect(parse("@fleet fix the build", "acme-agents")).toEqual({ kind: "none" });
    expect(parse("@fleet fix", "")).toEqual({ kind: "none" });
  });
});
