import { describe, expect, it } from "vitest";
import { filesNamedIn, sharedFiles } from "../../src/core/file-paths.ts";

describe("filesNamedIn", () => {
  it("takes backticked paths and bare paths with a folder and an extension", () => {
    const body = [
      "Fix the parser in `src/core/labels.ts` and update `README.md`.",
      "Also touch src/app/on-command.ts, then ./test/core/labels.test.ts.",
      "See `Makefile` too.",
    ].join("\n");
    expect(filesNamedIn(body)).toEqual([
      "Makefile",
      "README.md",
      "src/app/on-command.ts",
      "src/core/labels.ts",
      "test/core/labels.test.ts",
    ]);
  });

  it("ignores URLs, issue references, version numbers, bare file names and code blocks", () => {
    const body = [
      "See https://example.com/docs/guide.html and #12, e.g. v1.2 or 3.14.",
      "README.md without backticks is prose; `npm test` is a command.",
      "```",
      "cat src/secret/inside-block.ts",
      "```",
      "`../escape.ts` and `/etc/passwd.conf` are not repository paths.",
    ].join("\n");
    expect(filesNamedIn(body)).toEqual([]);
  });

  it("is unique and sorted", () => {
    expect(filesNamedIn("`b/x.ts` `a/y.ts` b/x.ts")).toEqual(["a/y.ts", "b/x.ts"]);
  });
});

describe("sharedFiles", () => {
  it("lists the files both name", () => {
    expect(sharedFiles(["src/a.ts", "src/b.ts"], ["src/b.ts", "src/a.ts", "c.md"])).toEqual([
      "src/a.ts",
      "src/b.ts",
    ]);
    expect(sharedFiles(["src/a.ts"], undefined)).toEqual([]);
    expect(sharedFiles([], ["src/a.ts"])).toEqual([]);
  });
});
