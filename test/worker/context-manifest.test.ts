import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { renderContextManifest } from "../../src/render/context-manifest.ts";
import { buildContextManifest, writeContextManifest } from "../../src/worker/workspace/context-manifest.ts";

let dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
  dirs = [];
});
const tmp = async () => {
  const d = await mkdtemp(join(tmpdir(), "fleet-knowledge-"));
  dirs.push(d);
  return d;
};

describe("context manifest", () => {
  it("flags a CLAUDE.md loaded twice under two paths with its token cost", async () => {
    const repo = await tmp();
    const home = await tmp();
    const guide = `# House rules\n\n${"Always run the tests before you finish. ".repeat(50)}\n`;
    await writeFile(join(repo, "CLAUDE.md"), guide);
    await mkdir(join(repo, ".claude"), { recursive: true });
    await writeFile(join(repo, ".claude", "CLAUDE.md"), guide.replace(/\n/g, "\r\n"));
    await mkdir(join(home, ".claude", "skills", "deploy"), { recursive: true });
    await writeFile(join(home, ".claude", "CLAUDE.md"), "Personal preferences: be brief.\n");
    await writeFile(join(home, ".claude", "skills", "deploy", "SKILL.md"), "How to deploy.\n");
    await writeFile(join(repo, "AGENTS.md"), "Codex-only notes.\n");

    const m = await buildContextManifest({ coder: "claude", cwd: repo, home, prompt: "Do the issue." });
    expect(m.sources.map((s) => s.path)).toEqual([
      "CLAUDE.md",
      ".claude/CLAUDE.md",
      "~/.claude/CLAUDE.md",
      "~/.claude/skills/deploy/SKILL.md",
      "(prompt)",
    ]);
    const dup = m.sources.find((s) => s.duplicateOf);
    expect(dup).toMatchObject({ path: ".claude/CLAUDE.md", duplicateOf: "CLAUDE.md" });
    expect(dup!.tokens).toBeGreaterThan(400);
    expect(m.duplicateTokens).toBe(dup!.tokens);
    expect(m.suggestions[0]).toMatch(
      /Remove \.claude\/CLAUDE\.md \(same content as CLAUDE\.md\) to save ~[\d,]+ tokens per turn/,
    );

    const md = renderContextManifest(m);
    expect(md).toContain("duplicate of `CLAUDE.md`");
    await writeContextManifest(repo, m);
    expect(JSON.parse(await readFile(join(repo, "context.json"), "utf8")).duplicateTokens).toBe(
      m.duplicateTokens,
    );
  });

  it("reads the coder's own memory files only, and reports nothing duplicated when nothing is", async () => {
    const repo = await tmp();
    await writeFile(join(repo, "CLAUDE.md"), "Claude notes.\n");
    await writeFile(join(repo, "AGENTS.md"), "Codex notes.\n");
    const m = await buildContextManifest({ coder: "codex", cwd: repo });
    expect(m.sources.map((s) => s.path)).toEqual(["AGENTS.md"]);
    expect(m.duplicateTokens).toBe(0);
    expect(m.suggestions).toEqual([]);
  });
});
