import { createHash } from "node:crypto";
import { readdir, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import type { ContextManifest, ContextSource } from "../../render/context-manifest.ts";
import { readAgentFile } from "./artifacts.ts";

/**
 * The context an agent loads before it does anything: memory files up the tree and in its home,
 * skills, MCP server configs, and Fleet's own prompt. Loaded twice under two names, the same text
 * costs twice on every turn, so duplicates are flagged with what removing one would save.
 */
// Which memory files each coder reads (its own docs); unknown coders get them all.
const MEMORY_FILES: Record<string, string[]> = {
  claude: ["CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md"],
  codex: ["AGENTS.md", "AGENTS.override.md"],
  gemini: ["GEMINI.md"],
  agy: ["GEMINI.md", "AGENTS.md"],
  // opencode reads AGENTS.md, and CLAUDE.md where a folder has no AGENTS.md.
  opencode: ["AGENTS.md", "CLAUDE.md"],
};
const HOME_MEMORY: Record<string, string[]> = {
  claude: [".claude/CLAUDE.md"],
  codex: [".codex/AGENTS.md"],
  gemini: [".gemini/GEMINI.md"],
  agy: [".gemini/GEMINI.md"],
  opencode: [".config/opencode/AGENTS.md"],
};

export const estimateTokens = (text: string): number => Math.ceil(text.length / 4);

/** A context file, read as an agent's file is (an earlier phase wrote the HOME): no symlink, no FIFO, capped. */
async function readIfFile(path: string): Promise<string | undefined> {
  return readAgentFile(path, 4 * 1024 * 1024).catch(() => undefined);
}

async function skillFiles(root: string): Promise<string[]> {
  try {
    const entries = await readdir(root, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory()).map((e) => join(root, e.name, "SKILL.md"));
  } catch {
    return [];
  }
}

/** Directories from `cwd` up to `top` (inclusive), nearest first. */
function upTheTree(cwd: string, top: string): string[] {
  const dirs: string[] = [];
  let dir = cwd;
  for (;;) {
    dirs.push(dir);
    if (dir === top || dirname(dir) === dir) break;
    dir = dirname(dir);
  }
  return dirs;
}

export async function buildContextManifest(input: {
  coder: string;
  /** The agent's working directory (the task's worktree). */
  cwd: string;
  /** How far up the tree to look (the worktree's root by default). */
  top?: string;
  /** The HOME the agent's files there come from: its private one, or the user's with `home: inherit`. */
  home?: string;
  prompt?: string;
}): Promise<ContextManifest> {
  const names = MEMORY_FILES[input.coder] ?? [...new Set(Object.values(MEMORY_FILES).flat())];
  const candidates: Array<{ kind: ContextSource["kind"]; path: string; label: string }> = [];
  for (const dir of upTheTree(input.cwd, input.top ?? input.cwd)) {
    for (const name of names) {
      const path = join(dir, name);
      candidates.push({ kind: "memory", path, label: relative(input.cwd, path) || name });
    }
  }
  for (const skill of await skillFiles(join(input.cwd, ".claude", "skills"))) {
    candidates.push({ kind: "skill", path: skill, label: relative(input.cwd, skill) });
  }
  candidates.push({ kind: "mcp", path: join(input.cwd, ".mcp.json"), label: ".mcp.json" });
  if (input.home) {
    for (const name of HOME_MEMORY[input.coder] ?? []) {
      candidates.push({ kind: "memory", path: join(input.home, name), label: `~/${name}` });
    }
    // Claude Code's own skills folder: other coders do not load it.
    const homeSkills =
      input.coder === "claude" ? await skillFiles(join(input.home, ".claude", "skills")) : [];
    for (const skill of homeSkills) {
      candidates.push({ kind: "skill", path: skill, label: `~/${relative(input.home, skill)}` });
    }
  }

  const sources: ContextSource[] = [];
  const firstByHash = new Map<string, string>();
  const add = (kind: ContextSource["kind"], path: string, text: string) => {
    const sha256 = createHash("sha256").update(text.replace(/\r\n/g, "\n").trim()).digest("hex");
    const source: ContextSource = {
      kind,
      path,
      bytes: Buffer.byteLength(text),
      tokens: estimateTokens(text),
      sha256,
    };
    const first = firstByHash.get(sha256);
    if (first !== undefined) source.duplicateOf = first;
    else firstByHash.set(sha256, path);
    sources.push(source);
  };
  for (const c of candidates) {
    const text = await readIfFile(c.path);
    if (text !== undefined && text.trim() !== "") add(c.kind, c.label, text);
  }
  if (input.prompt) add("prompt", "(prompt)", input.prompt);

  const duplicates = sources.filter((s) => s.duplicateOf !== undefined);
  return {
    coder: input.coder,
    sources,
    totalTokens: sources.reduce((n, s) => n + s.tokens, 0),
    duplicateTokens: duplicates.reduce((n, s) => n + s.tokens, 0),
    suggestions: duplicates.map(
      (d) =>
        `Remove ${d.path} (same content as ${d.duplicateOf}) to save ~${d.tokens.toLocaleString("en-US")} tokens per turn.`,
    ),
  };
}

export type { ContextManifest, ContextSource };

export const CONTEXT_MANIFEST_FILE = "context.json";

export async function writeContextManifest(dir: string, m: ContextManifest): Promise<void> {
  await writeFile(join(dir, CONTEXT_MANIFEST_FILE), `${JSON.stringify(m, null, 2)}\n`);
}
