import { describe, expect, it } from "vitest";
import {
  boundText,
  boundTitle,
  GITHUB_TITLE_MAX,
  JOINER,
  neutraliseMentions,
} from "../../src/core/published-text.ts";

const J = JOINER;
/** An at-sign GitHub would read as a mention (a login's first character right after it), anywhere in the text. */
const LIVE_AT = /(?:^|[^\w])(?:@|&commat;|&#0*64;|&#x0*40;)[A-Za-z0-9]/i;
const agent = (text: string) => neutraliseMentions(text, { untrusted: true });

describe("neutraliseMentions: text a person wrote, repeated by Fleet", () => {
  it("puts @login and @org/team in code spans and leaves e-mail addresses and code alone", () => {
    expect(neutraliseMentions("cancelled by @mona: ping @octo-org/admins now")).toBe(
      "cancelled by `@mona`: ping `@octo-org/admins` now",
    );
    expect(neutraliseMentions("mail a@b.com, `@kept` and ``@kept too``")).toBe(
      "mail a@b.com, `@kept` and ``@kept too``",
    );
    expect(neutraliseMentions("(@x) @y!")).toBe("(`@x`) `@y`!");
  });

  it("never lets a stray backtick pair with the span it adds", () => {
    expect(neutraliseMentions("a ` then @mallory")).toBe("a ` then `` @mallory ``");
    // Right after a stray backtick the runs would merge into one: a space keeps them apart.
    expect(neutraliseMentions("a `@mallory")).toBe("a ` `` @mallory ``");
    // A run of three and a run of two pair with nothing: the mention between them is plain text.
    expect(neutraliseMentions("```@x``")).toBe("``` `@x` ``");
    // An escaped backtick opens no span, and the span Fleet adds must not be escaped either.
    expect(neutraliseMentions("\\`@x`")).toBe("\\` `` @x `` `");
    expect(neutraliseMentions("\\@x")).toBe("\\ `@x`");
    // After a code span the mention is plain text again.
    expect(neutraliseMentions("`code`@x")).toBe("`code` `@x`");
  });

  it("keeps an at-sign right after a token inside the span, where no text node can start with it", () => {
    expect(neutraliseMentions("@a@b o/r#1@x.y fixes #2@c")).toBe("`@a@b` `o/r#1@x.y` fixes `#2@c`");
    expect(agent("o/r#1@x")).toBe(`\`o/r#${J}1@x\``);
  });

  it("is idempotent", () => {
    for (const t of ["@a `x` @b", "a `@mallory", "Fixes #3 and o/r#4 @c", "```@x``"]) {
      const once = neutraliseMentions(t);
      expect(neutraliseMentions(once), t).toBe(once);
    }
  });

  it("quotes references to other repositories and links to their issues, keeps #123 of this one", () => {
    expect(neutraliseMentions("see octo-org/other#12 and #34")).toBe("see `octo-org/other#12` and #34");
    expect(neutraliseMentions("like https://github.com/octo-org/other/issues/9.")).toBe(
      "like `https://github.com/octo-org/other/issues/9`.",
    );
    expect(neutraliseMentions("PR https://ghe.example.com/a/b/pull/3#issuecomment-1 now")).toBe(
      "PR `https://ghe.example.com/a/b/pull/3#issuecomment-1` now",
    );
    // A link keeps its text; its target is shown, not linked.
    expect(neutraliseMentions("[the bug](https://github.com/a/b/issues/2)")).toBe(
      "the bug (`https://github.com/a/b/issues/2`)",
    );
    // Not issue references: a deeper path with a fragment, a URL of something else.
    expect(neutraliseMentions("src/a/b.md#12 https://example.com/a/b/wiki/3")).toBe(
      "src/a/b.md#12 https://example.com/a/b/wiki/3",
    );
  });

  it("quotes a reference after a closing keyword, so merging the PR closes only what Fleet names", () => {
    expect(neutraliseMentions("Fixes #12, closes: GH-3 and resolved #4. Mentions #5.")).toBe(
      "Fixes `#12`, closes: `GH-3` and resolved `#4`. Mentions #5.",
    );
  });
});

describe("neutraliseMentions: text an agent wrote (untrusted)", () => {
  it("adds a joiner after the at-sign, so no markdown around it can make the mention live", () => {
    expect(agent("ping @mona")).toBe(`ping \`@${J}mona\``);
    // An HTML block is not markdown: the backticks stay literal there, the joiner still holds.
    const html = agent("<details>\n@octo-org/everyone\n</details>");
    expect(html).toBe(`<details>\n\`@${J}octo-org/everyone\`\n</details>`);
    // Inside what looks like code: the span may not be one (a table cell, a blank line between).
    expect(agent("| `a | @mona` |")).toBe(`| \`a | @${J}mona\` |`);
    expect(agent("`x\n\n@mona`")).toBe(`\`x\n\n@${J}mona\``);
    // Entities GitHub decodes into an at-sign before it looks for mentions.
    expect(agent("&#64;mona &#x40;carol &commat;dave")).toBe(`\`@${J}mona\` \`@${J}carol\` \`@${J}dave\``);
    expect(agent("mail a@b.com")).toBe("mail a@b.com");
  });

  it("leaves nothing GitHub reads as a mention, however the text is laid out", () => {
    const hostile = [
      "<div>\n@a\n</div>",
      "| `x | @b` |\n|---|---|",
      "\\`@c`",
      "```@d``",
      "`e`@f",
      '<span title="`">@g</span>`',
      "    indented `\n@h `",
      "&#0064;i &#X40;j",
      "[@k](https://example.com)",
    ].join("\n\n");
    const out = agent(hostile);
    expect(out).not.toMatch(LIVE_AT);
    expect(agent(out)).toBe(out);
  });

  it("makes references to other repositories and closing references inert, in code or not", () => {
    const out = agent("Fixes #12; see a/b#3, `c/d#4` and https://github.com/e/f/pull/5");
    expect(out).toBe(
      `Fixes \`#${J}12\`; see \`a/b#${J}3\`, \`c/d#${J}4\` and \`https://${J}github.com/e/f/pull/5\``,
    );
    expect(out).not.toMatch(/\w\/\w+#\d|https:\/\/github/);
    expect(agent(out)).toBe(out);
  });
});

describe("bounds on what Fleet publishes", () => {
  it("cuts a title to GitHub's 256 characters, on one line", () => {
    expect(GITHUB_TITLE_MAX).toBe(256);
    const t = boundTitle(`Fix it\nplease ${"x".repeat(400)}`);
    expect(t.length).toBeLessThanOrEqual(256);
    expect(t.startsWith("Fix it please x")).toBe(true);
    expect(t.endsWith("…")).toBe(true);
    expect(boundTitle("  short  ")).toBe("short");
    // Never half a surrogate pair.
    const emoji = boundTitle("😀".repeat(300), 10);
    expect([...emoji]).toHaveLength(10);
    expect(emoji).toBe(`${"😀".repeat(9)}…`);
  });

  it("cuts a body with a note saying how much was left out", () => {
    expect(boundText("short", 100)).toBe("short");
    const cut = boundText("y".repeat(10_000), 1_000, "The full text: `fleet task fl-1 result`.");
    expect(cut.length).toBeLessThanOrEqual(1_000);
    expect(cut).toMatch(/^y+\n\n… \d[\d,]* characters left out\. The full text: `fleet task fl-1 result`\.$/);
  });
});
