/**
 * Finding secrets in what leaves an agent's run (its changes, the commit message, the PR body, the
 * comments), in the forms an agent could use to smuggle one out: as it is, reversed, base64 (either
 * alphabet, at any byte offset inside a larger encoded blob), hex, URL-encoded, and split by any
 * non-alphanumeric characters (spaces, newlines, quotes and `+` of a string concatenation, base64
 * line wrapping). Well-known token shapes are found too, also inside decoded base64 and hex runs.
 * Pure and linear in the text for a fixed set of secrets.
 */

/** A known secret and how reports name it (never its value): e.g. "the worker's GitHub token". */
export interface LabeledSecret {
  label: string;
  value: string;
}

export type SecretForm =
  | "as it is"
  | "reversed"
  | "base64-encoded"
  | "hex-encoded"
  | "URL-encoded"
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
/** A form reduced to letters and digits must keep this many to be looked for split (false hits otherwise). */
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

const reverse = (text: string): string => [...text].reverse().join("");

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

/** Every form of `secret` this module looks for, as literal strings. */
export function encodedForms(secret: string): Array<{ form: SecretForm; text: string }> {
  const hex = Buffer.from(secret, "utf8").toString("hex");
  const forms: Array<{ form: SecretForm; text: string }> = [
    { form: "as it is", text: secret },
    { form: "reversed", text: reverse(secret) },
    ...base64Cores(secret).map((text) => ({ form: "base64-encoded" as const, text })),
    { form: "hex-encoded", text: hex },
    { form: "hex-encoded", text: hex.toUpperCase() },
  ];
  const url = encodeURIComponent(secret);
  if (url !== secret) forms.push({ form: "URL-encoded", text: url });
  return forms;
}

const scannable = (secrets: readonly LabeledSecret[]) =>
  secrets.filter((s) => s.value.trim().length >= MIN_SCANNED_SECRET_LENGTH);

/** The first known secret found in `text` in any form, or undefined. */
export function findKnownSecret(text: string, secrets: readonly LabeledSecret[]): SecretHit | undefined {
  const known = scannable(secrets);
  if (known.length === 0) return undefined;
  let textSkeleton: string | undefined;
  for (const secret of known) {
    for (const { form, text: needle } of encodedForms(secret.value.trim())) {
      if (needle.length >= MIN_SCANNED_SECRET_LENGTH && text.includes(needle))
        return { kind: "known", label: secret.label, form };
    }
  }
  for (const secret of known) {
    for (const { form, text: needle } of encodedForms(secret.value.trim())) {
      const bones = skeleton(needle);
      if (bones.length < MIN_SKELETON) continue;
      textSkeleton ??= skeleton(text);
      if (textSkeleton.includes(bones))
        return { kind: "known", label: secret.label, form: form === "as it is" ? "split into pieces" : form };
    }
  }
  return undefined;
}

/** Runs of base64 or hex long enough to hide a token, decoded (as Latin-1, byte for byte). */
function decodedRuns(text: string): string[] {
  const out: string[] = [];
  const flat = text.replace(/\s+/g, "");
  for (const m of flat.matchAll(/[A-Za-z0-9+/_-]{24,}={0,2}/g)) {
    const run = m[0].replace(/-/g, "+").replace(/_/g, "/");
    for (let shift = 0; shift < 4 && run.length - shift >= 24; shift++) {
      out.push(Buffer.from(run.slice(shift), "base64").toString("latin1"));
    }
  }
  for (const m of flat.matchAll(/(?:[0-9a-fA-F]{2}){16,}/g))
    out.push(Buffer.from(m[0], "hex").toString("latin1"));
  return out;
}

/** Token shapes in `text`, as they are or inside a decoded base64 / hex run; each match with its label. */
export function findTokenShapes(text: string): Array<{ label: string; match: string; encoded: boolean }> {
  const found: Array<{ label: string; match: string; encoded: boolean }> = [];
  const look = (t: string, encoded: boolean) => {
    for (const { label, pattern } of TOKEN_SHAPES) {
      pattern.lastIndex = 0;
      for (const m of t.matchAll(pattern)) found.push({ label, match: m[0], encoded });
    }
  };
  look(text, false);
  for (const decoded of decodedRuns(text)) look(decoded, true);
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
  const known = findKnownSecret(text, secrets);
  if (known) return known;
  const existing = new Set(findTokenShapes(before).map((f) => f.match));
  const shape = findTokenShapes(text).find((f) => !existing.has(f.match));
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
