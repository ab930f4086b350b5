import { describe, expect, it } from "vitest";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { coderNotReady } from "../../src/worker/coder-preflight.ts";

const config = defaultFleetConfig();

describe("coderNotReady: what stops a coder before its attempt is spent", () => {
  it("a CLI found nowhere is named, with where it was looked for and how to install it", async () => {
    const why = await coderNotReady({
      coder: "claude",
      adapter: { binary: "no-such-coder-cli" },
      config,
      path: "/usr/bin:/bin",
    });
    expect(why).toContain("`no-such-coder-cli` was not found on this worker's PATH or in Fleet's install");
    expect(why).toContain("npm install -g @anthropic-ai/claude-code");
  });

  it("a missing credential names each variable looked for; one set, or `home: inherit`, is enough", async () => {
    const base = { coder: "claude", adapter: { binary: "claude" }, config, path: "" };
    const none = await coderNotReady({ ...base, hasCredential: () => false });
    expect(none).toContain("looked for `ANTHROPIC_API_KEY` or `CLAUDE_CODE_OAUTH_TOKEN`");
    expect(none).toContain("coders.claude.credentials");
    expect(
      await coderNotReady({ ...base, hasCredential: (n) => n === "CLAUDE_CODE_OAUTH_TOKEN" }),
    ).toBeUndefined();
    const inherit = {
      ...config,
      coders: { ...config.coders, claude: { ...config.coders.claude!, home: "inherit" } },
    };
    expect(
      await coderNotReady({ ...base, config: inherit as typeof config, hasCredential: () => false }),
    ).toBeUndefined();
    // A worker that looks up no credential of its own (its caller hands one over) is not asked.
    expect(await coderNotReady(base)).toBeUndefined();
  });
});
