import { describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { codexAdapter } from "../../src/agents/codex.ts";
import type { AgentInvocation } from "../../src/agents/types.ts";
import type { CoderOptions } from "../../src/core/coder-options.ts";
import { parseFleetConfig } from "../../src/core/config-file.ts";

const inv = (options: CoderOptions, over: Partial<AgentInvocation> = {}): AgentInvocation => ({
  prompt: "p",
  model: "m",
  phase: "work",
  cwd: "/tmp/x",
  network: "proxy",
  options,
  ...over,
});
const flag = (args: string[], name: string) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
};

describe("coders.<coder>.options: claude argv", () => {
  it("max_turns, append_system_prompt and disallowed_tools reach the CLI's flags", () => {
    const { args } = claudeAdapter.command(
      inv({
        max_turns: 7,
        append_system_prompt: "Write tests first.",
        disallowed_tools: ["Write", "Bash(rm:*)"],
      }),
    );
    expect(flag(args, "--max-turns")).toBe("7");
    expect(flag(args, "--append-system-prompt")).toBe("Write tests first.");
    expect(flag(args, "--disallowedTools")).toBe("WebSearch,Write,Bash(rm:*)");
    // A bare tool that is denied is not offered at all; a rule narrows it only.
    expect(flag(args, "--tools")!.split(",")).not.toContain("Write");
    expect(flag(args, "--tools")!.split(",")).toContain("Bash");
  });

  it("allowed_tools replaces the work phase's list: --tools offers their names, --allowedTools their rules", () => {
    const { args } = claudeAdapter.command(
      inv({ allowed_tools: ["Read", "Grep", "Bash(npm test:*)", "mcp__docs__search"] }),
    );
    expect(flag(args, "--tools")).toBe("Read,Grep,Bash,TaskCreate,TaskUpdate,TaskList,WebFetch");
    expect(flag(args, "--allowedTools")).toBe("Read,Grep,Bash(npm test:*),mcp__docs__search,WebFetch");
  });

  it("never widens the network: WebSearch stays off unless network is host, whatever allowed_tools says", () => {
    const proxy = claudeAdapter.command(inv({ allowed_tools: ["Read", "WebSearch"] })).args;
    expect(flag(proxy, "--tools")).not.toContain("WebSearch");
    expect(flag(proxy, "--allowedTools")).not.toContain("WebSearch");
    expect(flag(proxy, "--disallowedTools")).toContain("WebSearch");
    const none = claudeAdapter.command(
      inv({ allowed_tools: ["Read", "WebFetch"] }, { network: "none" }),
    ).args;
    expect(flag(none, "--tools")).not.toContain("WebFetch");
    const host = claudeAdapter.command(
      inv({ allowed_tools: ["Read", "WebSearch"] }, { network: "host" }),
    ).args;
    expect(flag(host, "--allowedTools")).toBe("Read,WebSearch");
  });

  it("MCP servers go in --mcp-config with --strict-mcp-config; a remote one only on the host's network", () => {
    const options: CoderOptions = {
      mcp_servers: {
        docs: { command: "node", args: ["docs-server.js"], env: { LEVEL: "1" } },
        remote: { url: "https://mcp.example.com/mcp" },
      },
    };
    const proxy = claudeAdapter.command(inv(options)).args;
    expect(JSON.parse(flag(proxy, "--mcp-config")!)).toEqual({
      mcpServers: { docs: { type: "stdio", command: "node", args: ["docs-server.js"], env: { LEVEL: "1" } } },
    });
    expect(proxy).toContain("--strict-mcp-config");
    const host = claudeAdapter.command(inv(options, { network: "host" })).args;
    expect(Object.keys(JSON.parse(flag(host, "--mcp-config")!).mcpServers)).toEqual(["docs", "remote"]);
  });

  it("no options: no option flags, the built-in tools as before", () => {
    const { args } = claudeAdapter.command(inv({}));
    for (const f of ["--max-turns", "--append-system-prompt", "--mcp-config", "--strict-mcp-config"])
      expect(args).not.toContain(f);
    expect(flag(args, "--allowedTools")).toBe("Bash,Edit,Write,Read,Glob,Grep,WebFetch");
  });

  it("the plan phase stays read-only: allowed_tools does not add write tools to it", () => {
    const { args } = claudeAdapter.command(
      inv({ allowed_tools: ["Write", "Edit"], max_turns: 3 }, { phase: "plan" }),
    );
    expect(flag(args, "--permission-mode")).toBe("plan");
    expect(flag(args, "--tools")).not.toContain("Write");
    expect(flag(args, "--max-turns")).toBe("3");
  });

  it("codex: append_system_prompt as developer_instructions, MCP servers as mcp_servers.<name> overrides", () => {
    const { args } = codexAdapter.command(
      inv({
        append_system_prompt: 'Say "done".',
        mcp_servers: {
          docs: { command: "node", args: ["s.js"], env: { LEVEL: "1" } },
          remote: { url: "https://mcp.example.com/mcp" },
        },
      }),
    );
    const overrides = args.filter((_, i) => args[i - 1] === "-c");
    expect(overrides).toEqual(
      expect.arrayContaining([
        'developer_instructions="Say \\"done\\"."',
        'mcp_servers.docs.command="node"',
        'mcp_servers.docs.args=["s.js"]',
        'mcp_servers.docs.env={LEVEL="1"}',
      ]),
    );
    // A remote server is not passed off the host's network.
    expect(overrides.some((o) => o.startsWith("mcp_servers.remote"))).toBe(false);
    expect(args.at(-1)).toBe("-");
  });

  it("codex's argv is unchanged by an empty options mapping", () => {
    expect(codexAdapter.command(inv({})).args).toEqual(
      codexAdapter.command(inv({}, { options: undefined })).args,
    );
  });
});

describe("coders.<coder>.options in .github/fleet.yml", () => {
  it("claude takes all five", () => {
    const r = parseFleetConfig(`coders:
  claude:
    options:
      max_turns: 30
      allowed_tools: [Read, Edit, "Bash(npm test:*)"]
      disallowed_tools: [Write]
      append_system_prompt: Keep changes small.
      mcp_servers:
        docs: { command: node, args: [server.js] }
`);
    expect(r.ok && r.config.coders.claude!.options).toEqual({
      max_turns: 30,
      allowed_tools: ["Read", "Edit", "Bash(npm test:*)"],
      disallowed_tools: ["Write"],
      append_system_prompt: "Keep changes small.",
      mcp_servers: { docs: { command: "node", args: ["server.js"] } },
    });
  });

  it("an option a coder cannot honour is an error that says why", () => {
    const r = parseFleetConfig("coders:\n  codex:\n    options:\n      max_turns: 5\n");
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problems).toEqual([
      {
        path: "coders.codex.options.max_turns",
        message:
          "codex cannot honour max_turns: codex exec has no flag that limits its turns. Remove it from coders.codex.options.",
      },
    ]);
  });

  it("WebSearch and remote MCP servers are refused unless network: host", () => {
    const yml = `coders:
  claude:
    options:
      allowed_tools: [Read, WebSearch]
      mcp_servers:
        remote: { url: "https://mcp.example.com/mcp" }
`;
    const r = parseFleetConfig(yml);
    expect(!r.ok && r.problems.map((p) => p.path)).toEqual([
      "coders.claude.options.allowed_tools",
      "coders.claude.options.mcp_servers.remote",
    ]);
    expect(!r.ok && r.problems[0]!.message).toMatch(
      /WebSearch reaches past the network policy \(network: proxy\)/,
    );
    expect(parseFleetConfig(`network: host\n${yml}`).ok).toBe(true);
  });

  it("an unknown option is refused with the valid ones", () => {
    const r = parseFleetConfig("coders:\n  claude:\n    options:\n      max_turn: 5\n");
    expect(!r.ok && r.problems[0]!.path).toBe("coders.claude.options.max_turn");
    expect(!r.ok && r.problems[0]!.message).toMatch(/Did you mean "max_turns"\?/);
  });
});
