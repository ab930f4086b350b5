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

/**
 * Text safe to post: every known secret value (at least 8 characters) and every well-known token shape
 * (GitHub, Anthropic, OpenAI, AWS access keys, PEM private keys, Bearer tokens, credentials in URLs)
 * replaced by [REDACTED]. Linear in the text for a fixed set of secrets.
 */
export function redactSecrets(text: string, knownSecrets: readonly string[] = []): string {
  let out = text;
  // Longest first, so a secret that contains another is replaced whole.
  const secrets = [...new Set(knownSecrets.map((s) => s.trim()))]
    .filter((s) => s.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  out = redactPrivateKeys(out);
  for (const [pattern, replacement] of TOKEN_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}
