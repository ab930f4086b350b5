// The prompt is what the maintainer approved: an issue's title and body are pinned (as a digest on the
// task, the text itself as the task's bead) when the task is queued, and only an edit by someone who may
// drive Fleet moves the pin. Pure: the SHA-256 below is plain TypeScript, so core imports no I/O module.

/** The issue text a task was queued with (or re-pinned to), by digest. */
export interface PromptPin {
  /** `promptPinDigest(title, body)` in lowercase hex. */
  sha256: string;
  /** When the text was pinned (RFC3339). */
  at: string;
  /** Who pinned it: the person whose label queued the task, or who edited the issue with write access. */
  by: string;
  /** The latest edit of the issue by someone who may not drive Fleet: ignored, and noted on the tracking comment. */
  ignoredEdit?: { by: string; at: string };
}

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

/** SHA-256 of `text` (UTF-8), lowercase hex (FIPS 180-4). */
export function sha256Hex(text: string): string {
  const data = new TextEncoder().encode(text);
  const bitLength = data.length * 8;
  const padded = new Uint8Array(Math.ceil((data.length + 9) / 64) * 64);
  padded.set(data);
  padded[data.length] = 0x80;
  const view = new DataView(padded.buffer);
  // The length in bits as a 64-bit big-endian number (texts here are far below 2^53 bits).
  view.setUint32(padded.length - 8, Math.floor(bitLength / 2 ** 32));
  view.setUint32(padded.length - 4, bitLength >>> 0);
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32Array(64);
  const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n));
  for (let offset = 0; offset < padded.length; offset += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + i * 4);
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!;
      const b = w[i - 2]!;
      const s0 = rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3);
      const s1 = rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = [h[0]!, h[1]!, h[2]!, h[3]!, h[4]!, h[5]!, h[6]!, h[7]!];
    for (let i = 0; i < 64; i++) {
      const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + s1 + ch + K[i]! + w[i]!) >>> 0;
      const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (s0 + maj) >>> 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) >>> 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) >>> 0;
    }
    h[0] = (h[0]! + a) >>> 0;
    h[1] = (h[1]! + b) >>> 0;
    h[2] = (h[2]! + c) >>> 0;
    h[3] = (h[3]! + d) >>> 0;
    h[4] = (h[4]! + e) >>> 0;
    h[5] = (h[5]! + f) >>> 0;
    h[6] = (h[6]! + g) >>> 0;
    h[7] = (h[7]! + hh) >>> 0;
  }
  return [...h].map((x) => x.toString(16).padStart(8, "0")).join("");
}

/** GitHub may hand the same body back with CRLF or LF line ends; neither is an edit. A null body is "". */
const normalize = (text: string | null | undefined): string => (text ?? "").replace(/\r\n?/g, "\n");

/** The digest pinned on a task: title and body, each normalized, in one unambiguous encoding. */
export function promptPinDigest(title: string, body: string | null | undefined): string {
  return sha256Hex(JSON.stringify([normalize(title), normalize(body)]));
}

/** A fresh pin of this text. */
export function pinPrompt(
  text: { title: string; body: string | null | undefined },
  by: string,
  at: string,
): PromptPin {
  return { sha256: promptPinDigest(text.title, text.body), at, by };
}

export interface PromptTextChoice {
  title: string;
  body: string;
  /**
   * Where the text comes from: `current` (the issue as it is, matching the pin), `unpinned` (a task
   * queued before pins existed: the issue as it is), `pinned` (the issue was edited without approval:
   * the text as it was pinned), `missing` (the issue was edited and the pinned text cannot be found:
   * the task's title only; do not run the agent on the issue's current text).
   */
  source: "current" | "unpinned" | "pinned" | "missing";
  /** For the prompt or the run's report: why the agent does not get the issue's current text. */
  note?: string;
}

/**
 * The title and body the agent may be given: the issue's current text when it is what was pinned, else
 * the pinned text kept as the task's bead (`title` / `description` in `.beads/issues.jsonl`), with a note.
 */
export function choosePromptText(input: {
  task: { title: string; pin?: PromptPin };
  issue: { title: string; body: string | null | undefined };
  bead?: { title: string; description?: string | null };
}): PromptTextChoice {
  const { task, issue, bead } = input;
  const current = { title: issue.title, body: normalize(issue.body) };
  if (!task.pin) return { ...current, source: "unpinned" };
  if (promptPinDigest(issue.title, issue.body) === task.pin.sha256) return { ...current, source: "current" };
  const edited = task.pin.ignoredEdit
    ? `was edited by ${quoteLogin(task.pin.ignoredEdit.by)} (no write access)`
    : "was edited";
  if (bead && promptPinDigest(bead.title, bead.description) === task.pin.sha256) {
    return {
      title: bead.title,
      body: normalize(bead.description),
      source: "pinned",
      note: `The issue ${edited} after the task was queued; the agent gets the text as it was queued.`,
    };
  }
  return {
    title: task.title,
    body: "",
    source: "missing",
    note: `The issue ${edited} after the task was queued and the text as it was queued is not in the beads mirror; a maintainer must edit the issue (or label it again) to approve its current text.`,
  };
}

/** `@login` in backticks: named, not pinged. */
const quoteLogin = (login: string): string => `\`@${login}\``;
