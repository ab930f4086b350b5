// The node flags a command runs with (scripts/node-flags.mjs, applied by bin/fleet.js before the
// command loads; test/app/build-app.test.ts checks a started `fleet serve`'s command line).
import { describe, expect, it } from "vitest";
import { nodeFlagsFor, RUN_NODE_FLAGS, SERVE_NODE_FLAGS } from "../../scripts/node-flags.mjs";

describe("nodeFlagsFor", () => {
  it("gives the app and a worker their own flags, and a one-shot command none", () => {
    expect(nodeFlagsFor("serve", {})).toEqual(SERVE_NODE_FLAGS);
    expect(SERVE_NODE_FLAGS).toContain("--optimize-for-size");
    expect(nodeFlagsFor("run", {})).toEqual(RUN_NODE_FLAGS);
    expect(RUN_NODE_FLAGS).toContain("--optimize-for-size");
    for (const command of ["tasks", "task", "init", undefined, "toString", "__proto__"])
      expect(nodeFlagsFor(command, { FLEET_SERVE_NODE_FLAGS: "--x", FLEET_RUN_NODE_FLAGS: "--y" })).toEqual(
        [],
      );
  });

  it("takes each long-running command's variable over its own flags, split on spaces, empty for none", () => {
    const env = {
      FLEET_SERVE_NODE_FLAGS: "  --max-semi-space-size=8\t--stack-size=900 ",
      FLEET_RUN_NODE_FLAGS: "",
    };
    expect(nodeFlagsFor("serve", env)).toEqual(["--max-semi-space-size=8", "--stack-size=900"]);
    expect(nodeFlagsFor("run", env)).toEqual([]);
    expect(nodeFlagsFor("run", { FLEET_RUN_NODE_FLAGS: "--max-old-space-size=512" })).toEqual([
      "--max-old-space-size=512",
    ]);
    expect(nodeFlagsFor("serve", { FLEET_SERVE_NODE_FLAGS: "" })).toEqual([]);
    // The app's own flags are a copy: a caller that changes them changes nothing after it.
    nodeFlagsFor("serve", {}).push("--changed");
    expect(nodeFlagsFor("serve", {})).toEqual(SERVE_NODE_FLAGS);
  });

  it("refuses a word that is not a flag (node would run it as its script), naming the variable", () => {
    for (const value of ["/tmp/x.js", '"--max-old-space-size=512"', "--stack-size=900 app.js"])
      expect(() => nodeFlagsFor("serve", { FLEET_SERVE_NODE_FLAGS: value })).toThrow(
        /^FLEET_SERVE_NODE_FLAGS has `.+`, which is not a node flag: /,
      );
    expect(() => nodeFlagsFor("run", { FLEET_RUN_NODE_FLAGS: "x" })).toThrow(/^FLEET_RUN_NODE_FLAGS has `x`/);
  });

  it("refuses a flag that makes node do something else than run the command (a supervisor would see it end)", () => {
    for (const flag of [
      "--version",
      "-v",
      "--check",
      "-e",
      "--eval=1",
      "-p",
      "--test",
      "--watch",
      "--v8-options",
      "--inspect-brk",
      "--inspect-wait=9230",
    ])
      expect(() => nodeFlagsFor("run", { FLEET_RUN_NODE_FLAGS: `--max-old-space-size=512 ${flag}` })).toThrow(
        new RegExp(
          `^FLEET_RUN_NODE_FLAGS has \`${flag}\`, which makes node do something else than run \`fleet run\``,
        ),
      );
    // Flags that tune it pass, those of the operator's choosing too.
    expect(
      nodeFlagsFor("run", { FLEET_RUN_NODE_FLAGS: "--expose-gc --require=./x.cjs --stack-size=900" }),
    ).toEqual(["--expose-gc", "--require=./x.cjs", "--stack-size=900"]);
  });
});
