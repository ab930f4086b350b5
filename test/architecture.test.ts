// The layout, checked: imports point down (CONTRIBUTING.md), the GitHub emulator and the model servers
// are workspace packages of their own, and no function of src/ is longer than a reader can hold in mind.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { ISOLATED_TEST_FILES } from "../vitest.config.ts";

const SRC = join(import.meta.dirname, "..", "src");
/** Longest function (in lines) allowed in product code (src/; the workspace packages are test infrastructure). */
const MAX_FUNCTION_LINES = 120;

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

const files = tsFiles(SRC).map((path) => {
  const text = readFileSync(path, "utf8");
  return { path: relative(SRC, path), source: ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true) };
});

/** The folder a file belongs to (`core`, `worker`, `app`, ...). */
const folderOf = (path: string) => path.split("/")[0]!;

/** Every module specifier a file imports or re-exports. */
function importsOf(source: ts.SourceFile): string[] {
  const out: string[] = [];
  for (const statement of source.statements) {
    if ((ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier)
      out.push((statement.moduleSpecifier as ts.StringLiteral).text);
  }
  return out;
}

/** The src folder an import lands in, or the package name. */
function target(fromPath: string, spec: string): { folder?: string; pkg?: string } {
  if (!spec.startsWith(".")) return { pkg: spec };
  const resolved = relative(SRC, join(SRC, fromPath, "..", spec));
  return resolved.startsWith("..") ? {} : { folder: folderOf(resolved) };
}

/**
 * What each folder may import from src (everything else in src is off limits). Front doors (app,
 * action, cli, demo) sit on top; core imports nothing of Fleet's and no I/O.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  core: ["core"],
  process: ["process"],
  beads: ["core", "beads"],
  render: ["core", "render"],
  agents: ["core", "agents"],
  github: ["core", "render", "github"],
  state: ["core", "process", "beads", "github", "state"],
  economy: ["core", "state", "economy"],
  queue: ["core", "process", "beads", "render", "github", "state", "economy", "queue"],
  split: ["core", "render", "github", "split"],
  worker: [
    "core",
    "process",
    "beads",
    "render",
    "github",
    "state",
    "economy",
    "queue",
    "split",
    "agents",
    "worker",
  ],
  app: ["core", "process", "beads", "render", "github", "state", "economy", "queue", "split", "app"],
  action: ["core", "process", "render", "github", "state", "queue", "agents", "worker", "action"],
  cli: [
    "core",
    "process",
    "beads",
    "render",
    "github",
    "state",
    "economy",
    "queue",
    "agents",
    "worker",
    "app",
    "cli",
  ],
  demo: ["core", "process", "github", "state", "agents", "worker", "app", "demo"],
};
const NODE_IO = /^node:(fs|fs\/promises|child_process|http|https|net|os|path|process)$/;

describe("the layout", () => {
  it("imports point down: each folder imports only the folders below it", () => {
    const wrong: string[] = [];
    for (const { path, source } of files) {
      const folder = folderOf(path);
      const allowed = MAY_IMPORT[folder];
      if (!allowed) {
        wrong.push(
          `${path}: the folder "${folder}" has no place in the layout (add it to MAY_IMPORT and the README)`,
        );
        continue;
      }
      for (const spec of importsOf(source)) {
        const t = target(path, spec);
        if (t.folder && !allowed.includes(t.folder)) wrong.push(`${path} imports ${spec}`);
        if (
          folder === "core" &&
          t.pkg &&
          !["zod", "yaml"].includes(t.pkg) &&
          !t.pkg.startsWith("node:crypto")
        )
          wrong.push(`${path} (core, no I/O) imports ${spec}`);
        if (folder === "core" && t.pkg && NODE_IO.test(t.pkg))
          wrong.push(`${path} (core, no I/O) imports ${spec}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("the workspace packages (the GitHub emulator, the model servers) import nothing of Fleet's", () => {
    const root = join(SRC, "..", "packages");
    const wrong: string[] = [];
    for (const pkg of readdirSync(root)) {
      const dir = join(root, pkg);
      for (const path of tsFiles(dir)) {
        const source = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
        for (const spec of importsOf(source)) {
          const outside = spec.startsWith(".") && relative(dir, join(path, "..", spec)).startsWith("..");
          if (outside || spec === "fleet" || spec.startsWith("fleet/"))
            wrong.push(`${relative(root, path)} imports ${spec}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it("only src/github/ talks to Octokit: nothing else imports @octokit/* or calls its rest, paginate or request", () => {
    const wrong: string[] = [];
    for (const { path, source } of files) {
      if (folderOf(path) === "github") continue;
      for (const spec of importsOf(source))
        if (spec.startsWith("@octokit/") || spec === "@probot/octokit-plugin-config")
          wrong.push(`${path} imports ${spec}`);
      source.text.split("\n").forEach((line, i) => {
        if (/\boctokit\??\.(rest|paginate|request)\b/i.test(line))
          wrong.push(`${path}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(wrong).toEqual([]);
  });

  it("no GitHub client is cast into shape (`as unknown as` a GitHub type) in src/, test/ or bench/", () => {
    const root = join(SRC, "..");
    const cast = /as\s+unknown\s+as\s+GitHub/;
    const wrong = ["src", "test", "bench"].flatMap((dir) =>
      tsFiles(join(root, dir)).flatMap((path) =>
        readFileSync(path, "utf8")
          .split("\n")
          .flatMap((line, i) =>
            cast.test(line) ? [`${relative(root, path)}:${i + 1}: ${line.trim()}`] : [],
          ),
      ),
    );
    expect(wrong).toEqual([]);
  });

  it(`no function in src/ is longer than ${MAX_FUNCTION_LINES} lines`, () => {
    const long: string[] = [];
    for (const { path, source } of files) {
      const visit = (node: ts.Node) => {
        if (ts.isFunctionLike(node) && "body" in node && node.body) {
          const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
          const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
          if (end - start + 1 > MAX_FUNCTION_LINES) {
            const name = (node as ts.FunctionDeclaration).name?.getText() ?? "(anonymous)";
            long.push(`${path}:${start + 1} ${name}: ${end - start + 1} lines`);
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(long).toEqual([]);
  });

  it("no file-level import cycle (type-only imports included)", () => {
    const graph = new Map<string, string[]>();
    for (const { path, source } of files)
      graph.set(
        path,
        importsOf(source)
          .filter((spec) => spec.startsWith("."))
          .map((spec) => relative(SRC, join(SRC, path, "..", spec)))
          .filter((to) => !to.startsWith("..")),
      );
    // Tarjan's strongly connected components: every one with more than one file is a cycle.
    let index = 0;
    const at = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[] = [];
    const visit = (v: string) => {
      at.set(v, index);
      low.set(v, index++);
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!at.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, at.get(w)!));
      }
      if (low.get(v) !== at.get(v)) return;
      const component: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        onStack.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1 || (graph.get(v) ?? []).includes(v))
        cycles.push(component.sort().join(" <-> "));
    };
    for (const v of graph.keys()) if (!at.has(v)) visit(v);
    expect(cycles).toEqual([]);
  });

  it("nothing patches Probot's internals: no method of the app or its webhooks replaced, no listener of Probot's removed", () => {
    const patched = files.flatMap(({ path, source }) =>
      source.text
        .split("\n")
        .map((line, i) => ({ line, at: `${path}:${i + 1}` }))
        .filter(({ line }) =>
          /\.(getNodeMiddleware|verifyAndReceive|receive|verify|load)\s*=[^=]|process\.listeners\(\s*"SIG/.test(
            line,
          ),
        )
        .map(({ at, line }) => `${at}: ${line.trim()}`),
    );
    expect(patched).toEqual([]);
  });

  it("the README's picture and CONTRIBUTING's table name every folder of src/", () => {
    const root = join(SRC, "..");
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const picture = /## How it works\n\n```\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    const contributing = readFileSync(join(root, "CONTRIBUTING.md"), "utf8");
    const dirs = (dir: string) =>
      readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    const folders = dirs(SRC);
    const packages = dirs(join(root, "packages")).map((p) => `packages/${p}`);
    const missing = [
      ...folders.flatMap((f) => [
        ...(picture.includes(`${f}/`) ? [] : [`README picture: ${f}/`]),
        ...(contributing.includes(`\`src/${f}/\``) ? [] : [`CONTRIBUTING table: src/${f}/`]),
      ]),
      ...packages.flatMap((p) => [
        ...(picture.includes(`${p}/`) ? [] : [`README picture: ${p}/`]),
        ...(contributing.includes(`\`${p}/\``) ? [] : [`CONTRIBUTING table: ${p}/`]),
      ]),
    ];
    expect(picture).not.toBe("");
    expect(missing).toEqual([]);
  });

  it("a test file that changes what its process shares runs in a worker of its own (vitest.config.ts)", () => {
    const root = join(SRC, "..");
    // Module mocks and spies, stubbed globals or environment, fake timers, the working folder, an
    // environment variable set or deleted, V8's flags.
    const leaves =
      /\bvi\.(mock|doMock|stubGlobal|stubEnv|useFakeTimers|spyOn)\b|process\.chdir|process\.env(\.[A-Za-z_]+|\[[^\]]+\])\s*=[^=]|delete\s+process\.env|setFlagsFromString\(/;
    const testFiles = [
      ...tsFiles(join(root, "test")),
      ...readdirSync(join(root, "packages")).flatMap((p) => tsFiles(join(root, "packages", p, "test"))),
    ]
      .map((path) => relative(root, path))
      .filter((path) => path.endsWith(".test.ts"));
    const offenders = testFiles.filter(
      (path) => !ISOLATED_TEST_FILES.includes(path) && leaves.test(readFileSync(join(root, path), "utf8")),
    );
    expect(testFiles.length).toBeGreaterThan(200);
    expect(offenders).toEqual([]);
    // Each isolated file still exists (a renamed one would run shared).
    expect(ISOLATED_TEST_FILES.filter((path) => !testFiles.includes(path))).toEqual([]);
  });
});
