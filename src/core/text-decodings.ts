/**
 * Cheap decodings of a text, for the secret scan to look into: the ways an agent could write a
 * secret without its characters appearing as they are (HTML entities, backslash escapes, lists of
 * character codes, base64 and hex runs, full-width characters, every other character). Each is one
 * pass over the text with bounded or non-overlapping repetition, so all stay linear in the text.
 */

/** HTML's names for ASCII punctuation (letters and digits have none), and the usual few. */
const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
  excl: "!",
  num: "#",
  dollar: "$",
  percnt: "%",
  lpar: "(",
  rpar: ")",
  ast: "*",
  midast: "*",
  plus: "+",
  comma: ",",
  period: ".",
  sol: "/",
  colon: ":",
  semi: ";",
  equals: "=",
  quest: "?",
  commat: "@",
  lsqb: "[",
  lbrack: "[",
  bsol: "\\",
  rsqb: "]",
  rbrack: "]",
  Hat: "^",
  lowbar: "_",
  UnderBar: "_",
  grave: "`",
  lcub: "{",
  lbrace: "{",
  verbar: "|",
  vert: "|",
  rcub: "}",
  rbrace: "}",
  Tab: "\t",
  NewLine: "\n",
};

const codePoint = (n: number): string => (n <= 0x10ffff ? String.fromCodePoint(n) : "\ufffd");

/** `&#115;`, `&#x73;` (semicolon optional, as browsers read them) and named entities decoded. */
export function decodeHtmlEntities(text: string): string {
  return text.replace(
    /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{1,31}));?/g,
    (whole, dec?: string, hex?: string, name?: string) => {
      if (dec) return codePoint(Number(dec));
      if (hex) return codePoint(Number.parseInt(hex, 16));
      if (!whole.endsWith(";") || !name) return whole;
      // &aopf; &ascr; &afr;: HTML's double-struck, script and Fraktur letters, each one letter.
      const letter = /^([A-Za-z])(?:opf|scr|fr)$/.exec(name);
      return NAMED_ENTITIES[name] ?? letter?.[1] ?? whole;
    },
  );
}

/** `\x73`, `\u0073`, `\u{73}` and octal `\163` (JavaScript, JSON, Python, C, shell) decoded. */
export function decodeBackslashEscapes(text: string): string {
  return text.replace(
    /\\(?:u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([0-7]{1,3}))/g,
    (_, braced?: string, u4?: string, x2?: string, octal?: string) =>
      codePoint(octal ? Number.parseInt(octal, 8) : Number.parseInt(braced ?? u4 ?? x2 ?? "0", 16)),
  );
}

/**
 * A list of numbers (`115, 107` or `0x73, 0x6b`) as the characters they code. A loop, not split and
 * map: a list can be as long as the text.
 */
function charactersOf(list: string, radix: 10 | 16): string {
  const units = new Uint16Array(list.length);
  let n = 0;
  let value = 0;
  let digits = 0;
  const flush = () => {
    if (digits > 0) {
      const cp = value > 0x10ffff ? 0xfffd : value;
      if (cp > 0xffff) {
        units[n++] = 0xd800 + ((cp - 0x10000) >> 10);
        units[n++] = 0xdc00 + ((cp - 0x10000) & 0x3ff);
      } else units[n++] = cp;
    }
    value = 0;
    digits = 0;
  };
  for (let i = 0; i < list.length; i++) {
    const unit = list.charCodeAt(i);
    const c = unit >= 65 && unit <= 90 ? unit | 0x20 : unit; // A-F and X in lower case
    const d = c >= 48 && c <= 57 ? c - 48 : radix === 16 && c >= 97 && c <= 102 ? c - 87 : -1;
    if (d >= 0) {
      value = value * radix + d;
      digits++;
    } else if (c === 120) {
      value = 0; // the x of 0x: the 0 before it was a prefix
      digits = 0;
    } else flush();
  }
  flush();
  return fromCodeUnits(units, n);
}

/**
 * Lists of four or more numbers, each pair separated by one to four characters other than letters,
 * digits and dots (`115 107 45`, `[115, 107, 45]`, `["115","107"]`, `115-107`,
 * `String.fromCharCode(...)`), each list decoded as character codes. Dots are left out so that
 * version numbers and addresses are not read as lists.
 */
export function decodeDecimalRuns(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?<![\d.])\d{1,7}(?:[^0-9A-Za-z.]{1,4}\d{1,7}){3,}/g))
    out.push(charactersOf(m[0], 10));
  return out;
}

/**
 * Lists of `0x73, 0x6b, ...` bytes, and runs of 32 or more hex digits, decoded byte for byte
 * (Latin-1). `flat` is `text` without whitespace, when the caller has it already.
 */
export function decodeHexRuns(text: string, flat = withoutWhitespace(text)): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/0[xX][0-9a-fA-F]{1,2}(?:[^0-9A-Za-z.]{1,4}0[xX][0-9a-fA-F]{1,2}){3,}/g))
    out.push(charactersOf(m[0], 16));
  for (const m of flat.matchAll(/(?:[0-9a-fA-F]{2}){16,}/g))
    out.push(Buffer.from(m[0], "hex").toString("latin1"));
  return out;
}

/**
 * Runs of base64 (either alphabet, line-wrapped) long enough to hide a token, decoded byte for byte
 * (Latin-1). A run may start mid-word, so each is decoded from each of its first four characters.
 * `flat` is `text` without whitespace, when the caller has it already.
 */
export function decodeBase64Runs(text: string, flat = withoutWhitespace(text)): string[] {
  const out: string[] = [];
  for (const m of flat.matchAll(/[A-Za-z0-9+/_-]{24,}={0,2}/g)) {
    const run = m[0]; // Node's base64 decoder reads the URL-safe alphabet too
    for (let shift = 0; shift < 4 && run.length - shift >= 24; shift++)
      out.push(Buffer.from(run.slice(shift), "base64").toString("latin1"));
  }
  return out;
}

/** Full-width letters, digits and punctuation, and Unicode's other compatibility forms, as plain ones (NFKC). */
export const compatibilityFolded = (text: string): string =>
  text.replace(/[^\t\n\r -~]+/g, (run) => run.normalize("NFKC"));

/**
 * The lines of `text` that hold `trigger` and that `decode` changes, decoded, one per line: a
 * decoding's view of the text without a second copy of everything it leaves alone.
 */
export function changedLines(text: string, trigger: RegExp, decode: (line: string) => string): string {
  const out: string[] = [];
  const find = new RegExp(trigger.source, "g");
  for (let m = find.exec(text); m !== null; m = find.exec(text)) {
    const start = text.lastIndexOf("\n", m.index) + 1;
    const newline = text.indexOf("\n", m.index);
    const end = newline === -1 ? text.length : newline;
    const line = text.slice(start, end);
    const decoded = decode(line);
    if (decoded !== line) out.push(decoded);
    find.lastIndex = end + 1;
  }
  return out.join("\n");
}

/** Runs of 8 or more printable ASCII characters (as `strings` prints them): what a decoded blob could hide a secret in. */
export const printableRuns = (decoded: readonly string[]): string =>
  decoded.flatMap((d) => d.match(/[\t\n\r -~]{8,}/g) ?? []).join("\n");

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A string of the first `length` UTF-16 code units of `units` (a scratch array: it may be byte-swapped). */
function fromCodeUnits(units: Uint16Array, length: number): string {
  const bytes = Buffer.from(units.buffer, units.byteOffset, length * 2);
  if (!LITTLE_ENDIAN) bytes.swap16();
  return bytes.toString("utf16le");
}

/**
 * The letters and digits of an already lower-cased text. A loop, not a regex replace: replacing
 * most of the characters of a large text one match at a time is several times slower.
 */
export function lettersAndDigits(folded: string): string {
  const out = new Uint16Array(folded.length);
  let n = 0;
  for (let i = 0; i < folded.length; i++) {
    const c = folded.charCodeAt(i);
    if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57)) out[n++] = c;
  }
  return fromCodeUnits(out, n);
}

/** `text` without spaces, line breaks and other control characters (base64 and hex are wrapped with them). */
export function withoutWhitespace(text: string): string {
  const out = new Uint16Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 32 && c !== 0xa0) out[n++] = c;
  }
  return fromCodeUnits(out, n);
}

/** The code units at even and at odd positions. */
export function everyOther(text: string): [string, string] {
  const even = new Uint16Array((text.length + 1) >> 1);
  const odd = new Uint16Array(text.length >> 1);
  for (let i = 0; i < even.length; i++) even[i] = text.charCodeAt(2 * i);
  for (let i = 0; i < odd.length; i++) odd[i] = text.charCodeAt(2 * i + 1);
  return [fromCodeUnits(even, even.length), fromCodeUnits(odd, odd.length)];
}
