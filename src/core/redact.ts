import { encodedForms, skeleton, skeletonSpans } from "./secret-scan.ts";

export const REDACTED = "[REDACTED]";

/** Known secret values shorter than this are not replaced: they would match ordinary text. */
export const MIN_SECRET_LENGTH = 8;

// Each pattern is a single pass with bounded or non-overlapping repetition, so redaction stays linear.
const TOKEN_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})/g, REDACTED],
  [/\bsk-ant-[A-Za-z0-9_-]{8,}/g, REDACTED],
  [/\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}/g, REDACTED],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, REDACTED],
  [/\b(Bearer)[ \t]+[A-Za-z0-9._~+/=-]{8,}/gi, `$1 ${REDACTED}`],
  [/\bx-access-token:[^@\s]+@/g, `x-access-token:${REDACTED}@`],
  // Any other credentials in a URL: scheme://user:secret@host
  [/(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:)[^@\s/]+@/gi, `$1${REDACTED}@`],
];

const BEGIN_KEY = /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----/g;
const END_KEY = /-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----/g;

/** Replaces PEM private key blocks; an unterminated block is redacted to the end of the text. */
function redactPrivateKeys(text: string): string {
  BEGIN_KEY.lastIndex = 0;
  let out = "";
  let from = 0;
  for (let begin = BEGIN_KEY.exec(text); begin !== null; begin = BEGIN_KEY.exec(text)) {
    out += `${text.slice(from, begin.index)}${REDACTED}`;
    END_KEY.lastIndex = begin.index + begin[0].length;
    const end = END_KEY.exec(text);
    if (end === null) return out;
    from = end.index + end[0].length;
    BEGIN_KEY.lastIndex = from;
  }
  return out + text.slice(from);
}

/** A skeleton (letters and digits) this long is specific enough to redact a secret split into pieces. */
const MIN_SPLIT_SKELETON = 10;

/** Replaces the spans of `text` where `bones` is spelled out with other characters in between. */
function redactSplit(text: string, bones: string): string {
  const spans = skeletonSpans(text, bones);
  let out = text;
  for (const [start, end] of spans.reverse()) out = `${out.slice(0, start)}${REDACTED}${out.slice(end)}`;
  return out;
}

/**
 * A redactor for a fixed set of known secrets, their encoded forms worked out once. `split: false`
 * skips the search for secrets split into pieces (for text redacted line by line, such as a log).
 */
export function secretRedactor(
  knownSecrets: readonly string[] = [],
  opts: { split?: boolean } = {},
): (text: string) => string {
  // Longest first, so a secret that contains another is replaced whole.
  const secrets = [...new Set(knownSecrets.map((s) => s.trim()))]
    .filter((s) => s.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  const forms = secrets
    .flatMap((s) => encodedForms(s).map((f) => f.text))
    .filter((f) => f.length >= MIN_SECRET_LENGTH);
  const bones =
    opts.split === false
      ? []
      : [...new Set(forms.map(skeleton))].filter((b) => b.length >= MIN_SPLIT_SKELETON);
  return (text) => {
    let out = text;
    for (const form of forms) if (out.includes(form)) out = out.split(form).join(REDACTED);
    // One pass finds whether any secret is spelled out in pieces at all (in most texts none is); only
    // then is each searched for and replaced, in order, as before.
    if (bones.length > 0) {
      const letters = skeleton(out);
      if (bones.some((b) => letters.includes(b))) for (const b of bones) out = redactSplit(out, b);
    }
    return redactTokenShapes(out);
  };
}

/**
 * Text safe to post: every known secret value (at least 8 characters) in the literal forms the secret
 * scan knows (as it is, reversed, rot13, halves swapped, base64, hex, URL-encoded, full-width, split
 * into pieces) and every well-known token shape (GitHub, Anthropic, OpenAI, AWS access keys, PEM
 * private keys, Bearer tokens, credentials in URLs) replaced by [REDACTED]. Linear in the text for a
 * fixed set of secrets.
 */
export function redactSecrets(text: string, knownSecrets: readonly string[] = []): string {
  return secretRedactor(knownSecrets)(text);
}

function redactTokenShapes(text: string): string {
  let out = text;
  out = redactPrivateKeys(out);
  for (const [pattern, replacement] of TOKEN_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}
