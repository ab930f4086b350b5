/**
 * Text Fleet publishes on GitHub that someone else wrote: a person's words repeated in a reply, or an
 * agent's (its summary, tests, follow-ups, plan, split plan). Published as written, it would make
 * Fleet's bot notify whoever it names and reference issues anywhere; this makes it inert:
 *
 * - `@login` and `@org/team` go in a code span: named, not pinged (GitHub skips mentions in code). An
 *   e-mail address (`a@b.com`) is left as it is.
 * - References to issues of other repositories (`owner/repo#12`, a link to `…/owner/repo/issues/12`
 *   or `/pull/12`) go in a code span too: each would add a "mentioned this" event to that issue's
 *   timeline, so a text with a hundred of them spams a hundred issues Fleet has nothing to do with.
 *   Fleet cannot tell here which repository it writes to, so the long form of its own repository is
 *   quoted as well; a bare `#12` is kept: it links within the repository whose maintainers run Fleet,
 *   where readers of a pull request need those links.
 * - A reference after a closing keyword (`Fixes #12`, `closes GH-3`) goes in a code span: merging
 *   the pull request would close it. Fleet's own `Closes #N` is the only one a PR of Fleet's carries.
 *
 * An agent's text is hostile (`untrusted`): it can lay markdown out so that a code span does not form
 * where Fleet thinks one does (an HTML block, a table cell, an escaped backtick) and a mention in it
 * stays live. So in an agent's text every such token also gets a zero-width joiner after its `@`,
 * `#` or `://`, in code or not: invisible in the code span a reader sees, and no markdown undoes it.
 */

/** U+200D: after an `@` (or a reference's `#`), GitHub no longer reads a mention (or a reference). */
export const JOINER = "\u200d";

/** GitHub refuses issue and pull request titles longer than this. */
export const GITHUB_TITLE_MAX = 256;

export interface NeutraliseOptions {
  /** The text is an agent's: add the joiner too (see above). */
  untrusted?: boolean;
}

// An at-sign, also as the entities GitHub decodes before it looks for mentions.
const AT = "(?:@|&commat;|&#0*64;|&#x0*40;)";
const LOGIN = "[A-Za-z0-9][A-Za-z0-9-]{0,38}(?:\\/[A-Za-z0-9][\\w.-]*)?";
const REPO = "[A-Za-z0-9][A-Za-z0-9-]{0,38}\\/[A-Za-z0-9._-]{1,100}";
const ISSUE_URL = `https?:\\/\\/[A-Za-z0-9.-]+(?::\\d+)?\\/${REPO}\\/(?:issues|pull|pulls|discussions)\\/\\d+(?:#[\\w-]+)?`;

// One pass, leftmost first, so nothing Fleet adds is read again.
const TOKEN = new RegExp(
  [
    `\\[([^\\]\\n]*)\\]\\((${ISSUE_URL})\\)`, // 1, 2: a markdown link to an issue
    `(${ISSUE_URL})`, // 3: a bare link to an issue
    `(?<![\\w/.@-])(${REPO}#\\d+)(?!\\w)`, // 4: owner/repo#12
    `\\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(:?[ \\t]+)(#\\d+|GH-\\d+)(?!\\w)`, // 5, 6, 7
    `(?<!\\w)${AT}(${LOGIN})`, // 8: a mention
  ].join("|"),
  "gi",
);

const TAIL = new RegExp(`(?:${AT}[\\w.-]*)*`, "iy");

/** The token with the joiner where GitHub would start reading it (agent text only). */
function inert(token: string, joiner: string): string {
  return token
    .replace(new RegExp(`^${AT}`, "i"), `@${joiner}`)
    .replace(/^(https?:\/\/)/i, `$1${joiner}`)
    .replace(/(#|GH-)(\d+)$/i, `$1${joiner}$2`);
}

/** A maximal run of backticks: where it starts and how long it is. */
interface Run {
  at: number;
  len: number;
}

/**
 * The code spans of `text` as CommonMark pairs backtick runs (a run is closed by the next run of the
 * same length; one closed by none is plain text; an escaped backtick opens nothing), and the lengths
 * of the runs left unpaired. Linear: each length keeps a pointer into its runs.
 */
function codeSpans(text: string): { spans: Array<[number, number]>; unpaired: Set<number> } {
  const runs: Run[] = [];
  for (const m of text.matchAll(/`+/g)) runs.push({ at: m.index, len: m[0].length });
  const byLen = new Map<number, number[]>();
  runs.forEach((r, i) => {
    const list = byLen.get(r.len);
    if (list) list.push(i);
    else byLen.set(r.len, [i]);
  });
  const next = new Map<number, number>();
  const spans: Array<[number, number]> = [];
  const unpaired = new Set<number>();
  let i = 0;
  while (i < runs.length) {
    const run = runs[i]!;
    let slashes = 0;
    while (run.at - slashes - 1 >= 0 && text[run.at - slashes - 1] === "\\") slashes++;
    const open = slashes % 2 === 1 ? { at: run.at + 1, len: run.len - 1 } : run;
    const list = byLen.get(open.len) ?? [];
    let p = next.get(open.len) ?? 0;
    while (p < list.length && list[p]! <= i) p++;
    next.set(open.len, p);
    if (open.len === 0 || p >= list.length) {
      if (open.len > 0) unpaired.add(open.len);
      i++;
      continue;
    }
    const close = runs[list[p]!]!;
    spans.push([open.at, close.at + close.len]);
    i = list[p]! + 1;
  }
  return { spans, unpaired };
}

/**
 * `text` with every mention and foreign or closing issue reference made inert (see the top of this
 * file). Code spans already there are kept; in untrusted text the tokens inside them get the joiner.
 * Idempotent: its output passes through unchanged.
 */
export function neutraliseMentions(text: string, opts: NeutraliseOptions = {}): string {
  const joiner = opts.untrusted ? JOINER : "";
  const { spans, unpaired } = codeSpans(text);
  // A span Fleet adds must not pair with a stray run: its runs are a length no stray run has.
  let ticks = 1;
  while (unpaired.has(ticks)) ticks++;
  const fence = "`".repeat(ticks);
  // The characters beside it decide whether it needs a space to keep its runs apart.
  const quote = (token: string, before: string | undefined, after: string | undefined, tail = ""): string => {
    const pad = (c: string | undefined, also: string) => (c === "`" || c === also ? " " : "");
    const inner = ticks > 1 ? ` ${inert(token, joiner)}${tail} ` : `${inert(token, joiner)}${tail}`;
    return `${pad(before, "\\")}${fence}${inner}${fence}${pad(after, "`")}`;
  };
  const plain = (from: number, to: number): string => {
    let out = "";
    let last = from;
    const token = new RegExp(TOKEN.source, TOKEN.flags);
    const segment = text.slice(0, to);
    token.lastIndex = from;
    for (let m = token.exec(segment); m; m = token.exec(segment)) {
      const [match, linkText, linkUrl, url, ref, keyword, gap, closing, login] = m;
      const at = m.index;
      // An at-sign right after the token was no mention (a word character before it); after the span
      // Fleet adds it would start a text node and be one: it goes in the span too.
      TAIL.lastIndex = at + match.length;
      const tail = TAIL.exec(segment)?.[0] ?? "";
      const end = at + match.length + tail.length;
      token.lastIndex = end;
      out += text.slice(last, at);
      last = end;
      if (linkUrl !== undefined) out += `${linkText} (${quote(linkUrl, "(", ")")})`;
      else if (keyword !== undefined && gap !== undefined && closing !== undefined)
        out += `${keyword}${gap}${quote(closing, gap.at(-1), text[end], tail)}`;
      else
        out += quote(
          login !== undefined ? `@${login}` : (url ?? ref ?? match),
          text[at - 1],
          text[end],
          tail,
        );
    }
    return out + text.slice(last, to);
  };
  const code = (from: number, to: number): string =>
    joiner
      ? text.slice(from, to).replace(TOKEN, (match, ...g: unknown[]) => {
          const [linkText, linkUrl, , , , , , login] = g as Array<string | undefined>;
          if (linkUrl !== undefined) return `[${linkText}](${inert(linkUrl, joiner)})`;
          return login !== undefined ? `@${joiner}${login}` : inert(match, joiner);
        })
      : text.slice(from, to);
  let out = "";
  let i = 0;
  for (const [start, end] of spans) {
    out += plain(i, start) + code(start, end);
    i = end;
  }
  return out + plain(i, text.length);
}

/** A title as GitHub takes it: one line, at most `max` characters (never half of one), cut with `…`. */
export function boundTitle(text: string, max = GITHUB_TITLE_MAX): string {
  const line = text.replace(/\s+/g, " ").trim();
  const chars = [...line];
  return chars.length <= max
    ? line
    : `${chars
        .slice(0, max - 1)
        .join("")
        .trimEnd()}…`;
}

/**
 * At most `max` characters of `text`: its start, and a note saying how much was left out and, with
 * `where`, where the whole is.
 */
export function boundText(text: string, max: number, where?: string): string {
  if (text.length <= max) return text;
  const note = (n: number) =>
    `\n\n… ${n.toLocaleString("en-US")} characters left out.${where ? ` ${where}` : ""}`;
  let keep = Math.max(0, max - note(text.length).length);
  // Never half a surrogate pair.
  if (keep > 0 && /[\ud800-\udbff]/.test(text[keep - 1]!)) keep--;
  return `${text.slice(0, keep)}${note(text.length - keep)}`;
}

/** Text as a Markdown block quote, every line of it (blank ones too). */
export const blockQuote = (text: string): string => `> ${text.replace(/\n/g, "\n> ")}`;

/**
 * An agent's text made plain where Fleet publishes it as its own: every line ending is a newline (a
 * lone CR ends a line in CommonMark, which would end a block quote the text is put in), control
 * characters other than tab and newline are dropped, and no HTML comment opens (`<!--` would let it
 * plant the markers Fleet finds its own comments and sections by).
 */
export function plainAgentText(text: string): string {
  return (
    text
      .replace(/\r\n?/g, "\n")
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
      .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "")
      .replace(/<!--/g, `<!${JOINER}--`)
  );
}
