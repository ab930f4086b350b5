import { describe, expect, it } from "vitest";
import { FLEET_COMMAND_HELP, parseFleetCommand } from "../../src/core/commands.ts";

const errorOf = (body: string, onPullRequest = false): string => {
  const r = parseFleetCommand(body, { onPullRequest });
  if (r.kind !== "error") throw new Error(`expected error, got ${JSON.stringify(r)}`);
  return r.message;
};

describe("parseFleetCommand", () => {
  it("reads simple commands, case-insensitively", () => {
    expect(parseFleetCommand("/fleet status")).toEqual({ kind: "status" });
    expect(parseFleetCommand("  /FLEET Help")).toEqual({ kind: "help" });
    expect(parseFleetCommand("/fleet labels")).toEqual({ kind: "labels" });
    expect(parseFleetCommand("/fleet cancel")).toEqual({ kind: "cancel" });
    expect(parseFleetCommand("/fleet cancel wrong approach")).toEqual({
      kind: "cancel",
      reason: "wrong approach",
    });
    expect(parseFleetCommand("/fleet approve")).toEqual({ kind: "approve" });
    expect(parseFleetCommand("/fleet approve but keep the API stable")).toEqual({
      kind: "approve",
      note: "but keep the API stable",
    });
  });

  it("reads retry with an optional coder and model", () => {
    expect(parseFleetCommand("/fleet retry")).toEqual({ kind: "retry" });
    expect(parseFleetCommand("/fleet retry codex")).toEqual({ kind: "retry", coder: "codex" });
    expect(parseFleetCommand("/fleet retry claude:opus")).toEqual({
      kind: "retry",
      coder: "claude",
      model: "opus",
    });
    expect(errorOf("/fleet retry claude opus")).toContain("takes an optional coder or coder:model");
    expect(errorOf("/fleet retry Cl@ude")).toContain('got "Cl@ude"');
  });

  it("reads config set with several validated assignments", () => {
    expect(parseFleetCommand("/fleet config set max_concurrent=5 plan_approval=true")).toEqual({
      kind: "config-set",
      assignments: [
        { key: "max_concurrent", value: 5 },
        { key: "plan_approval", value: true },
      ],
    });
    const msg = errorOf("/fleet config set max_concurrent=0 colour=red");
    expect(msg).toContain("max_concurrent must be a whole number from 1 to 100");
    expect(msg).toContain('"colour" is not a settable key');
    expect(errorOf("/fleet config max_concurrent=5")).toContain("`/fleet config` needs `set key=value`");
    expect(errorOf("/fleet config set")).toContain("needs at least one key=value");
  });

  it("finds the command on any live line and ignores text around it", () => {
    expect(parseFleetCommand("Thanks!\n\n/fleet retry\n\nlater")).toEqual({ kind: "retry" });
  });

  it("ignores quoted lines, code blocks, indented code and mid-line mentions", () => {
    expect(parseFleetCommand("> /fleet cancel")).toEqual({ kind: "none" });
    expect(parseFleetCommand("```\n/fleet cancel\n```")).toEqual({ kind: "none" });
    expect(parseFleetCommand("~~~sh\n/fleet cancel\n~~~")).toEqual({ kind: "none" });
    expect(parseFleetCommand("    /fleet cancel")).toEqual({ kind: "none" });
    expect(parseFleetCommand("please run /fleet cancel")).toEqual({ kind: "none" });
    expect(parseFleetCommand("/fleetcancel")).toEqual({ kind: "none" });
    expect(parseFleetCommand("```\n/fleet cancel\n```\n/fleet status")).toEqual({ kind: "status" });
    expect(parseFleetCommand("")).toEqual({ kind: "none" });
  });

  it("an unclosed fence hides everything after it", () => {
    expect(parseFleetCommand("```\n/fleet cancel")).toEqual({ kind: "none" });
  });

  it("reads an answer, with the task it names, and refuses an empty one", () => {
    expect(parseFleetCommand("/fleet answer Blue.\nAnd a red border.")).toEqual({
      kind: "answer",
      text: "Blue.\nAnd a red border.",
    });
    expect(parseFleetCommand("/fleet answer FL-a3f Blue")).toEqual({
      kind: "answer",
      text: "Blue",
      taskId: "fl-a3f",
    });
    expect(errorOf("/fleet answer")).toContain("`/fleet answer` needs the answer");
    expect(errorOf("/fleet answer fl-a3f")).toContain("to name the task");
  });

  it("treats free text as review instructions on pull requests only", () => {
    expect(
      parseFleetCommand("/fleet please rename foo to bar\nand add a test", { onPullRequest: true }),
    ).toEqual({
      kind: "instructions",
      text: "please rename foo to bar\nand add a test",
    });
    expect(parseFleetCommand("/fleet\nfix the lint errors", { onPullRequest: true })).toEqual({
      kind: "instructions",
      text: "fix the lint errors",
    });
    const msg = errorOf("/fleet please rename foo");
    expect(msg).toContain("Unknown command `/fleet please`");
    expect(msg).toContain("status, cancel, retry, approve, answer, config set, help, labels");
    expect(msg).toContain("on Fleet pull requests only");
    // Commands still win on a pull request.
    expect(parseFleetCommand("/fleet status", { onPullRequest: true })).toEqual({ kind: "status" });
  });

  it("explains bare /fleet and stray arguments, with the help text", () => {
    const msg = errorOf("/fleet");
    expect(msg).toContain("`/fleet` needs a command.");
    expect(msg).toContain(FLEET_COMMAND_HELP);
    expect(errorOf("/fleet status now")).toContain('`/fleet status` takes no arguments (got "now")');
  });

  it("handles CRLF bodies", () => {
    expect(parseFleetCommand("hi\r\n/fleet cancel\r\n")).toEqual({ kind: "cancel" });
  });
});
