import {
  changedLines,
  compatibilityFolded,
  decodeBackslashEscapes,
  decodeBase64Runs,
  decodeDecimalRuns,
  decodeHexRuns,
  decodeHtmlEntities,
  everyOther,
  lettersAndDigits,
  printableRuns,
  withoutWhitespace,
} from "./text-decodings.ts";

/**
 * Finding secrets in what leaves an agent's run (its changes, the commit message, the PR body, the
 * comments), in the forms an agent could use to smuggle one out: as it is, in upper or lower case,
 * reversed, rot13, cut in two with the pieces swapped or placed apart, as its even and odd
 * characters or interleaved with junk, base64 (either alphabet, at any byte offset inside a larger
 * encoded blob, nested up to three deep), hex, URL-encoded, HTML entities, backslash escapes,
 * decimal character codes, full-width characters, and split by any non-alphanumeric characters
 * (spaces, newlines, quotes and `+` of a string concatenation, base64 line wrapping). Well-known
 * token shapes are found too, also inside decoded base64 and hex runs. Pure and linear in the text
 * for a fixed set of secrets.
 */

/** A known secret and how reports name it (never its value): e.g. "the worker's GitHub token". */
export interface LabeledSecret {
  label: string;
  value: string;
}

/**
 * How a secret was found. Where it took two steps to hide (reversed, then written as HTML entities),
 * the form names the step the scan undid on the text: the decoding, else the change of case.
 */
export type SecretForm =
  | "as it is"
  | "upper or lower case"
  | "reversed"
  | "rot13"
  | "swapped halves"
  | "every other character"
  | "base64-encoded"
  | "base64 of base64"
  | "hex-encoded"
  | "URL-encoded"
  | "HTML entities"
  | "backslash escapes"
  | "decimal bytes"
  | "full-width or compatibility characters"
  | "split into pieces"
  | "in the shape of a known token";

export interface SecretHit {
  /** A known secret's value, or a well-known token shape (not known to Fleet). */
  kind: "known" | "shape";
  /** The secret's label, or what the token looks like ("a GitHub token"). */
  label: string;
  form: SecretForm;
}

/** Values shorter than this are not looked for: they would match ordinary text. */
export const MIN_SCANNED_SECRET_LENGTH = 8;
/**
 * A form reduced to letters and digits must keep this many to be looked for split, and a piece of a
 * secret (a half, its even characters) this many to count: shorter ones would match ordinary text.
 */
const MIN_SKELETON = 10;

/** Well-known credential shapes (GitHub, Anthropic, OpenAI, AWS, Google, Slack, PEM keys). */
export const TOKEN_SHAPES: ReadonlyArray<{ label: string; pattern: RegExp }> = [
  {
    label: "a GitHub token",
    pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255})/g,
  },
  { label: "an Anthropic API key", pattern: /\bsk-ant-[A-Za-z0-9_-]{20,}/g },
  { label: "an OpenAI API key", pattern: /\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}/g },
  { label: "an AWS access key", pattern: /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g },
  { label: "a Google API key", pattern: /\bAIza[0-9A-Za-z_-]{35}\b/g },
  { label: "a Slack token", pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g },
  { label: "a private key", pattern: /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----/g },
];

/** Letters and digits only. */
export const skeleton = (text: string): string => text.replace(/[^A-Za-z0-9]/g, "");

/** Lower case, letters and digits only: what most of the scan compares. */
const foldedSkeleton = (text: string): string => lettersAndDigits(text.toLowerCase());

const reverse = (text: string): string => [...text].reverse().join("");

const rot13 = (text: string): string =>
  text.replace(/[A-Za-z]/g, (c) => {
    const a = c <= "Z" ? 65 : 97;
    return String.fromCharCode(((c.charCodeAt(0) - a + 13) % 26) + a);
  });

/** ASCII printable characters as their full-width twins (U+FF01..U+FF5E, U+3000 for a space). */
const fullWidth = (text: string): string =>
  text.replace(/[\x20-\x7e]/g, (c) => (c === " " ? "\u3000" : String.fromCharCode(c.charCodeAt(0) + 0xfee0)));

/**
 * The parts of base64(prefix + secret + suffix) that depend on the secret alone, for each of the
 * three byte offsets the secret can start at, in both alphabets: an encoded blob that contains the
 * secret anywhere contains one of these.
 */
function base64Cores(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes])
      .toString("base64")
      .replace(/=+$/, "");
    const first = Math.ceil((offset * 8) / 6);
    const last = Math.floor(((offset + bytes.length) * 8) / 6);
    const core = encoded.slice(first, last);
    cores.push(core, core.replace(/\+/g, "-").replace(/\//g, "_"));
  }
  return [...new Set(cores)];
}

/** Every form of `secret` this module looks for as a literal string (redaction replaces these). */
export function encodedForms(secret: string): Array<{ form: SecretForm; text: string }> {
  const hex = Buffer.from(secret, "utf8").toString("hex");
  const half = secret.length >> 1;
  const forms: Array<{ form: SecretForm; text: string }> = [
    { form: "as it is", text: secret },
    { form: "reversed", text: reverse(secret) },
    { form: "rot13", text: rot13(secret) },
    { form: "swapped halves", text: secret.slice(half) + secret.slice(0, half) },
    ...base64Cores(secret).map((text) => ({ form: "base64-encoded" as const, text })),
    { form: "hex-encoded", text: hex },
    { form: "hex-encoded", text: hex.toUpperCase() },
    { form: "URL-encoded", text: encodeURIComponent(secret) },
    { form: "full-width or compatibility characters", text: fullWidth(secret) },
  ];
  const seen = new Set<string>();
  return forms.filter((f) => !seen.has(f.text) && seen.add(f.text));
}

/** One form of a secret as the scan compares it: in lower case, and as letters and digits when that is specific enough. */
interface Needle {
  form: SecretForm;
  exact: string;
  folded: string;
  bones?: string;
}

/** What the scan looks for of one secret, worked out once per scan. */
interface Probe {
  label: string;
  needles: Needle[];
  /** The needles of the secret as it is and reversed: what is looked for interleaved with junk. */
  plain: Needle[];
  /** The secret as rotations and pieces are compared: its folded skeleton, else (too short) its folded self. */
  core: string;
  coreIsSkeleton: boolean;
  /** The folded skeletons of its even and of its odd characters, when both are long enough to count. */
  evenOdd?: [string, string];
}

function probe(secret: LabeledSecret): Probe {
  const value = secret.value.trim();
  const needles: Needle[] = [];
  const seen = new Set<string>();
  for (const { form, text } of encodedForms(value)) {
    if (text.length < MIN_SCANNED_SECRET_LENGTH) continue;
    const bones = foldedSkeleton(text);
    const needle = {
      form,
      exact: text,
      folded: text.toLowerCase(),
      ...(bones.length >= MIN_SKELETON && { bones }),
    };
    const key = needle.bones ?? needle.folded;
    if (!seen.has(key)) needles.push(needle);
    seen.add(key);
  }
  const bones = foldedSkeleton(value);
  const [even, odd] = everyOther(value).map(foldedSkeleton) as [string, string];
  return {
    label: secret.label,
    needles,
    plain: needles.filter((n) => n.form === "as it is" || n.form === "reversed"),
    core: bones.length >= MIN_SKELETON ? bones : value.toLowerCase(),
    coreIsSkeleton: bones.length >= MIN_SKELETON,
    ...(even.length >= MIN_SKELETON &&
      odd.length >= MIN_SKELETON && { evenOdd: [even, odd] as [string, string] }),
  };
}

/**
 * A text the scan looks in: the outgoing text itself (`exact` kept), or a decoding of it, named by
 * how it was decoded. `plainOnly`: look only for the secret as it is or reversed, as written
 * (`folded`) or as letters and digits (`bones`), either of which may be empty.
 */
interface View {
  name?: SecretForm;
  exact?: string;
  folded: string;
  bones: string;
  plainOnly?: boolean;
}

/** A decoding of the text as a view. */
function decoded(name: SecretForm, text: string): View {
  const folded = text.toLowerCase();
  return { name, folded, bones: lettersAndDigits(folded) };
}

/** The base64 and hex runs of a text decoded, each worked out once: the secret scan and the token-shape search share them. */
interface Runs {
  base64(): string[];
  hex(): string[];
}

function runsOf(text: string): Runs {
  let flat: string | undefined;
  let base64: string[] | undefined;
  let hex: string[] | undefined;
  const flatText = () => {
    flat ??= withoutWhitespace(text);
    return flat;
  };
  return {
    base64: () => {
      base64 ??= decodeBase64Runs(text, flatText());
      return base64;
    },
    hex: () => {
      hex ??= decodeHexRuns(text, flatText());
      return hex;
    },
  };
}

/** The outgoing text, then its decodings, each made only when the ones before held nothing. */
function* views(text: string, runs: Runs): Generator<View> {
  const folded = text.toLowerCase();
  const bones = lettersAndDigits(folded);
  yield { exact: text, folded, bones };
  // A secret interleaved with junk, one character of each in turn (of the text or of its letters and digits).
  const name = "every other character";
  for (const half of everyOther(folded)) yield { name, folded: half, bones: "", plainOnly: true };
  for (const half of everyOther(bones)) yield { name, folded: "", bones: half, plainOnly: true };
  const compatible = changedLines(text, /[^\t\n\r -~]/, compatibilityFolded);
  if (compatible) yield decoded("full-width or compatibility characters", compatible);
  const entities = changedLines(text, /&[#A-Za-z]/, decodeHtmlEntities);
  if (entities) yield decoded("HTML entities", entities);
  const escapes = changedLines(text, /\\[ux0-7]/, decodeBackslashEscapes);
  if (escapes) yield decoded("backslash escapes", escapes);
  const decimal = printableRuns(decodeDecimalRuns(text));
  if (decimal) yield decoded("decimal bytes", decimal);
  const hex = printableRuns(runs.hex());
  if (hex) yield decoded("hex-encoded", hex);
  // Base64 nested to a bounded depth: the secret's base64 forms inside twice-decoded runs is base64 three deep.
  const base64 = printableRuns(runs.base64());
  if (!base64) return;
  yield decoded("base64-encoded", base64);
  const nested = printableRuns(decodeBase64Runs(base64));
  if (nested) yield decoded("base64 of base64", nested);
}

const holds = (view: View, needle: Needle): boolean =>
  needle.bones ? view.bones.includes(needle.bones) : view.folded.includes(needle.folded);

/** How `probe`'s secret shows in `view`, if it does. */
function lookIn(view: View, p: Probe): SecretForm | undefined {
  if (view.plainOnly) {
    const found = p.plain.some(
      (n) => view.folded.includes(n.folded) || (n.bones !== undefined && view.bones.includes(n.bones)),
    );
    return found ? view.name : undefined;
  }
  for (const needle of p.needles) if (holds(view, needle)) return formOf(view, needle);
  const hay = p.coreIsSkeleton ? view.bones : view.folded;
  if (holdsRotation(hay, p.core)) return view.name ?? "swapped halves";
  if (p.evenOdd?.every((piece) => view.bones.includes(piece))) return view.name ?? "every other character";
  if (holdsTwoPieces(hay, p.core)) return view.name ?? "split into pieces";
  return undefined;
}

/** The form a needle's hit is reported as: what was decoded, else the form, told apart from case changes and splits. */
function formOf(view: View, needle: Needle): SecretForm {
  if (view.exact === undefined) {
    return view.name === "base64-encoded" && needle.form === "base64-encoded"
      ? "base64 of base64"
      : view.name!;
  }
  if (needle.form !== "as it is") return needle.form;
  if (view.exact.includes(needle.exact)) return "as it is";
  const bones = skeleton(needle.exact);
  return bones.length >= MIN_SKELETON && skeleton(view.exact).includes(bones)
    ? "split into pieces"
    : "upper or lower case";
}

/** How many characters before `end` in `hay` match those before `sEnd` in `s`. */
function matchBackward(hay: string, end: number, s: string, sEnd: number): number {
  let n = 0;
  while (n < sEnd && n < end && hay[end - 1 - n] === s[sEnd - 1 - n]) n++;
  return n;
}

/** How many characters from `start` in `hay` match those from `sStart` in `s`. */
function matchForward(hay: string, start: number, s: string, sStart: number): number {
  let n = 0;
  while (sStart + n < s.length && start + n < hay.length && hay[start + n] === s[sStart + n]) n++;
  return n;
}

/**
 * Whether `hay` holds `s` cut in two anywhere and the pieces swapped (s[k..] + s[..k]). Such a text
 * holds one half of `s` whole; each place a half occurs is extended both ways, at most |s| steps.
 */
function holdsRotation(hay: string, s: string): boolean {
  const h = s.length >> 1;
  const first = s.slice(0, h);
  const second = s.slice(h);
  // Cut at k <= h: s[k..h] + second + s[..k].
  for (let at = hay.indexOf(second); at !== -1; at = hay.indexOf(second, at + 1)) {
    const before = matchBackward(hay, at, s, h);
    const after = matchForward(hay, at + second.length, s, 0);
    if (Math.max(1, h - before) <= Math.min(h, after)) return true;
  }
  // Cut at k = h + j > h: s[k..] + first + s[h..k].
  for (let at = hay.indexOf(first); at !== -1; at = hay.indexOf(first, at + 1)) {
    const before = matchBackward(hay, at, s, s.length);
    const after = matchForward(hay, at + h, s, h);
    if (Math.max(1, second.length - before) <= Math.min(second.length - 1, after)) return true;
  }
  return false;
}

/** The longest n <= max for which `hay` holds `piece(n)`, given it holds piece(n) for every n up to that (binary search). */
function longestHeld(hay: string, max: number, piece: (n: number) => string): number {
  if (!hay.includes(piece(MIN_SKELETON))) return 0;
  let lo = MIN_SKELETON;
  let hi = max;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (hay.includes(piece(mid))) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Whether `hay` holds all of `s` in two pieces, anywhere, each long enough to count: a head and a tail that meet. */
function holdsTwoPieces(hay: string, s: string): boolean {
  if (s.length < 2 * MIN_SKELETON) return false;
  const head = longestHeld(hay, s.length, (n) => s.slice(0, n));
  if (head < MIN_SKELETON) return false;
  const tail = longestHeld(hay, s.length, (n) => s.slice(s.length - n));
  return tail >= MIN_SKELETON && head + tail >= s.length;
}

const scannable = (secrets: readonly LabeledSecret[]) =>
  secrets.filter((s) => s.value.trim().length >= MIN_SCANNED_SECRET_LENGTH);

/** The first known secret found in `text` in any form, or undefined. */
export function findKnownSecret(text: string, secrets: readonly LabeledSecret[]): SecretHit | undefined {
  return knownSecretIn(text, secrets, runsOf(text));
}

function knownSecretIn(text: string, secrets: readonly LabeledSecret[], runs: Runs): SecretHit | undefined {
  const probes = scannable(secrets).map(probe);
  if (probes.length === 0) return undefined;
  for (const view of views(text, runs)) {
    for (const p of probes) {
      const form = lookIn(view, p);
      if (form) return { kind: "known", label: p.label, form };
    }
  }
  return undefined;
}

/** Token shapes in `text`, as they are or inside a decoded base64 / hex run; each match with its label. */
export const findTokenShapes = (text: string): TokenShapeMatch[] => tokenShapesIn(text, runsOf(text));

type TokenShapeMatch = { label: string; match: string; encoded: boolean };

function tokenShapesIn(text: string, runs: Runs): TokenShapeMatch[] {
  const found: TokenShapeMatch[] = [];
  const look = (t: string, encoded: boolean) => {
    for (const { label, pattern } of TOKEN_SHAPES) {
      pattern.lastIndex = 0;
      for (const m of t.matchAll(pattern)) found.push({ label, match: m[0], encoded });
    }
  };
  look(text, false);
  for (const decoded of [...runs.base64(), ...runs.hex()]) look(decoded, true);
  return found;
}

/**
 * What an outgoing text (added lines of a change, a commit message, a PR body) gives away: a known
 * secret in any form, or a token shape that `before` (the same file before the change) did not
 * already hold. Undefined when it is clean.
 */
export function scanOutgoing(
  text: string,
  secrets: readonly LabeledSecret[],
  before = "",
): SecretHit | undefined {
  const runs = runsOf(text);
  const known = knownSecretIn(text, secrets, runs);
  if (known) return known;
  const existing = new Set(findTokenShapes(before).map((f) => f.match));
  const shape = tokenShapesIn(text, runs).find((f) => !existing.has(f.match));
  if (!shape) return undefined;
  return {
    kind: "shape",
    label: shape.label,
    form: shape.encoded ? "base64-encoded" : "in the shape of a known token",
  };
}

/**
 * Spans of `text` whose letters and digits spell `bones` (a secret's skeleton) consecutively: the
 * secret split by other characters. Each span runs from the first to the last character of a match.
 */
export function skeletonSpans(text: string, bones: string): Array<[number, number]> {
  if (bones.length === 0) return [];
  const positions: number[] = [];
  let letters = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const alnum = (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
    if (alnum) {
      positions.push(i);
      letters += text[i];
    }
  }
  const spans: Array<[number, number]> = [];
  for (let at = letters.indexOf(bones); at !== -1; at = letters.indexOf(bones, at + bones.length)) {
    spans.push([positions[at]!, positions[at + bones.length - 1]! + 1]);
  }
  return spans;
}
