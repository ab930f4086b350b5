import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REDACTED, redactSecrets } from "../../src/core/redact.ts";
import {
  encodedForms,
  findKnownSecret,
  findTokenShapes,
  scanOutgoing,
  skeletonSpans,
} from "../../src/core/secret-scan.ts";
import {
  decodeBackslashEscapes,
  decodeDecimalRuns,
  decodeHexRuns,
  decodeHtmlEntities,
} from "../../src/core/text-decodings.ts";

const TOKEN = "ghs_0123456789abcdefghijABCDEFGHIJ012345";
const KEY = { label: "the worker's GitHub token", value: TOKEN };
const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("known secrets in the forms an agent would smuggle them in", () => {
  const cases: Array<[string, string, string]> = [
    ["as it is", `token=${TOKEN}`, "as it is"],
    ["reversed", [...TOKEN].reverse().join(""), "reversed"],
    ["base64 at offset 0", b64(TOKEN), "base64-encoded"],
    ["base64 inside a larger blob (offset 1)", b64(`x${TOKEN}yz`), "base64-encoded"],
    ["base64 inside a larger blob (offset 2)", b64(`GITHUB_TOKEN=${TOKEN}\nHOME=/root\n`), "base64-encoded"],
    ["base64url", Buffer.from(`??>${TOKEN}`).toString("base64url"), "base64-encoded"],
    ["hex", Buffer.from(TOKEN).toString("hex"), "hex-encoded"],
    ["upper-case hex", Buffer.from(TOKEN).toString("hex").toUpperCase(), "hex-encoded"],
    ["split by spaces", TOKEN.split("").join(" "), "split into pieces"],
    [
      "a string concatenation",
      `const t = "${TOKEN.slice(0, 10)}" + "${TOKEN.slice(10, 25)}" + "${TOKEN.slice(25)}";`,
      "split into pieces",
    ],
    ["base64 wrapped at 20 columns", b64(`key: ${TOKEN}`).replace(/(.{20})/g, "$1\n"), "base64-encoded"],
  ];
  for (const [name, text, form] of cases) {
    it(`finds it ${name}`, () => {
      expect(findKnownSecret(text, [KEY])).toEqual({ kind: "known", label: KEY.label, form });
    });
  }

  it("finds nothing in ordinary text, or for values too short to be told apart", () => {
    expect(findKnownSecret("nothing to see here, 0123456789", [KEY])).toBeUndefined();
    expect(findKnownSecret("abc", [{ label: "short", value: "abc" }])).toBeUndefined();
  });

  it("every encoded form is redacted from text Fleet posts", () => {
    for (const { text } of encodedForms(TOKEN)) {
      const out = redactSecrets(`before ${text} after`, [TOKEN]);
      expect(out, text).toContain(REDACTED);
      expect(findKnownSecret(out, [KEY]), text).toBeUndefined();
    }
    const split = redactSecrets(`x "${TOKEN.slice(0, 12)}" + "${TOKEN.slice(12)}" y`, [TOKEN]);
    expect(split).toBe(`x "${REDACTED}" y`);
  });

  it("skeletonSpans maps a split match back to the characters of the text", () => {
    expect(skeletonSpans("a-b c_d!e", "bcd")).toEqual([[2, 7]]);
    expect(skeletonSpans("abcabc", "abc")).toEqual([
      [0, 3],
      [3, 6],
    ]);
  });
});

describe("known secrets under simple transforms", () => {
  const chars = [...TOKEN];
  const half = TOKEN.length / 2;
  const rot13 = (s: string) =>
    s.replace(/[A-Za-z]/g, (c) => {
      const base = c <= "Z" ? 65 : 97;
      return String.fromCharCode(((c.charCodeAt(0) - base + 13) % 26) + base);
    });
  const even = chars.filter((_, i) => i % 2 === 0).join("");
  const odd = chars.filter((_, i) => i % 2 === 1).join("");
  const junk = "q7Zr2Kx9Wm4Tn8Vb6Yc1Hd5Lf3Pg0Js";
  const interleaved = chars.map((c, i) => `${c}${junk[i % junk.length]}`).join("");
  const fullWidth = chars.map((c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0)).join("");
  const codes = chars.map((c) => c.charCodeAt(0));
  const named: Record<string, string> = { _: "&lowbar;" };
  const mixedCase = chars.map((c, i) => (i % 3 === 0 ? c.toLowerCase() : c.toUpperCase())).join("");

  const cases: Array<[string, string, string]> = [
    ["in upper case", `const t = "${TOKEN.toUpperCase()}";`, "upper or lower case"],
    ["in lower case", TOKEN.toLowerCase(), "upper or lower case"],
    ["in mixed case", mixedCase, "upper or lower case"],
    [
      "in upper case, split into pieces",
      `"${TOKEN.slice(0, 15).toUpperCase()}" + "${TOKEN.slice(15).toUpperCase()}"`,
      "upper or lower case",
    ],
    ["with its halves swapped", `x=${TOKEN.slice(half)}${TOKEN.slice(0, half)}`, "swapped halves"],
    ["cut off-centre and the pieces swapped", `${TOKEN.slice(7)}${TOKEN.slice(0, 7)}`, "swapped halves"],
    [
      "with its halves swapped in a string concatenation",
      `"${TOKEN.slice(half)}" + "${TOKEN.slice(0, half)}"`,
      "swapped halves",
    ],
    [
      "in two halves far apart",
      `a = "${TOKEN.slice(0, half)}"\n${"const filler = 42;\n".repeat(20)}b = "${TOKEN.slice(half)}"`,
      "split into pieces",
    ],
    ["in rot13", `secret: ${rot13(TOKEN)}`, "rot13"],
    ["in upper-case rot13", rot13(TOKEN).toUpperCase(), "rot13"],
    ["interleaved with junk (every other character)", `blob ${interleaved} end`, "every other character"],
    [
      "as its even and odd characters in two places",
      `const a = "${even}";\nconst b = "${odd}";`,
      "every other character",
    ],
    ["as base64 of base64", b64(b64(TOKEN)), "base64 of base64"],
    [
      "as base64 of base64 inside larger blobs, line-wrapped",
      b64(`data: ${b64(`GITHUB_TOKEN=${TOKEN}`)}\n`).replace(/(.{76})/g, "$1\n"),
      "base64 of base64",
    ],
    ["as base64 of base64 of base64", `x ${b64(b64(b64(TOKEN)))}`, "base64 of base64"],
    ["as decimal HTML entities", codes.map((c) => `&#${c};`).join(""), "HTML entities"],
    ["as hex HTML entities", codes.map((c) => `&#x${c.toString(16)};`).join(""), "HTML entities"],
    [
      "as HTML entities, named where there is a name",
      chars.map((c) => named[c] ?? `&#${c.charCodeAt(0)};`).join(""),
      "HTML entities",
    ],
    ["in full-width characters", `ok ${fullWidth} ok`, "full-width or compatibility characters"],
    ["as decimal bytes separated by spaces", codes.join(" "), "decimal bytes"],
    ["as decimal bytes in an array", `const b = [${codes.join(", ")}];`, "decimal bytes"],
    ["as decimal bytes in quotes", `["${codes.join('","')}"]`, "decimal bytes"],
    ["as decimal bytes joined by dashes", codes.join("-"), "decimal bytes"],
    [
      "as a hex byte array",
      `const b = [${codes.map((c) => `0x${c.toString(16)}`).join(", ")}];`,
      "hex-encoded",
    ],
    ["as backslash escapes", `"${codes.map((c) => `\\x${c.toString(16)}`).join("")}"`, "backslash escapes"],
    ["as unicode escapes", `"${codes.map((c) => `\\u00${c.toString(16)}`).join("")}"`, "backslash escapes"],
  ];
  for (const [name, text, form] of cases) {
    it(`finds it ${name}`, () => {
      expect(findKnownSecret(text, [KEY])).toEqual({ kind: "known", label: KEY.label, form });
      expect(scanOutgoing(text, [KEY])).toEqual({ kind: "known", label: KEY.label, form });
    });
  }
});

describe("no false hits on ordinary text", () => {
  // Secrets of the lengths and alphabets Fleet holds (tokens, API keys, hex gateway tokens), made by a
  // seeded generator so a failure can be replayed.
  // mulberry32: a plain LCG's low bits repeat every 2^16 draws, which would plant the secrets in the data.
  let seed = 20240611;
  const next = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
  const draw = (alphabet: string, n: number) =>
    Array.from({ length: n }, () => alphabet[next() % alphabet.length]).join("");
  const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const secrets = [
    ...[8, 9, 12, 16, 20, 24, 32, 40, 64].map((n) => draw(alnum, n)),
    ...[8, 16, 32, 64].map((n) => draw("0123456789abcdef", n)),
    ...[8, 12, 20].map((n) => draw("0123456789", n)),
    `ghs_${draw(alnum, 36)}`,
    `github_pat_${draw(`${alnum}_`, 82)}`,
    `sk-ant-api03-${draw(`${alnum}-_`, 93)}AA`,
    `sk-proj-${draw(`${alnum}-_`, 48)}`,
  ].map((value, i) => ({ label: `secret ${i}`, value }));

  const root = join(import.meta.dirname, "../..");
  const sources = (dir: string): string[] =>
    readdirSync(join(root, dir), { recursive: true, encoding: "utf8" })
      .filter((f) => /\.(ts|md|json|ya?ml)$/.test(f))
      .map((f) => join(dir, f));
  const corpus = [...sources("src"), ...sources("docs"), "package-lock.json", "README.md", "CONTRIBUTING.md"];

  it("ordinary source code, the lockfile and prose hold none of them", () => {
    expect(corpus.length).toBeGreaterThan(100);
    const hits = corpus.flatMap((file) => {
      const hit = findKnownSecret(readFileSync(join(root, file), "utf8"), secrets);
      return hit ? [`${file}: ${hit.label} (${hit.form})`] : [];
    });
    expect(hits).toEqual([]);
  });

  it("nor do random bytes, as base64 (wrapped and not), hex and decimal lists (a binary file, hashes)", () => {
    const bytes = Buffer.from(Array.from({ length: 300_000 }, () => next() & 0xff));
    const base64 = bytes.toString("base64");
    const texts = [
      base64,
      base64.replace(/(.{76})/g, "$1\n"),
      Buffer.from(base64).toString("base64"),
      bytes.toString("hex"),
      [...bytes.subarray(0, 50_000)].join(", "),
      bytes.toString("latin1"),
    ];
    for (const text of texts) expect(findKnownSecret(text, secrets)).toBeUndefined();
  });

  it("the same texts, all in one piece (as the change as a whole is checked), hold none of them", () => {
    const everything = corpus.map((file) => readFileSync(join(root, file), "utf8")).join("\n");
    expect(findKnownSecret(everything, secrets)).toBeUndefined();
  });
});

describe("token shapes", () => {
  const openai = `sk-proj-${"A1b2C3d4".repeat(5)}`;
  it("are found as they are and inside decoded base64 and hex runs", () => {
    expect(findTokenShapes(`key ${openai}`)).toEqual([
      { label: "an OpenAI API key", match: openai, encoded: false },
    ]);
    expect(findTokenShapes(b64(`export KEY=${openai}\n`)).map((f) => f.encoded)).toContain(true);
    expect(findTokenShapes(Buffer.from(openai).toString("hex")).map((f) => f.label)).toContain(
      "an OpenAI API key",
    );
  });

  it("count only when the file did not hold them before (a fixture that is moved is not a leak)", () => {
    const fixture = `const fake = "${TOKEN}";`;
    expect(scanOutgoing(fixture, [], fixture)).toBeUndefined();
    expect(scanOutgoing(fixture, [], "")).toEqual({
      kind: "shape",
      label: "a GitHub token",
      form: "in the shape of a known token",
    });
  });

  it("a known secret counts even when it was there before", () => {
    expect(scanOutgoing(TOKEN, [KEY], TOKEN)?.kind).toBe("known");
  });
});

describe("decodings", () => {
  it("read number lists whatever separates them, but not version numbers", () => {
    expect(decodeDecimalRuns("a = [104, 105, 33, 63]; v1.2.3.4 1.2.3.4")).toEqual(["hi!?"]);
    expect(decodeDecimalRuns(`104\u0010105\u0011104\u0012105`)).toEqual(["hihi"]);
    expect(decodeHexRuns("0x68,0X69, 0x21 ,0x3f", "")).toEqual(["hi!?"]);
  });

  it("decode HTML entities, numeric (semicolon optional) and named", () => {
    expect(decodeHtmlEntities("&#104;&#x69&lowbar;&Hat;&aopf;&unknown; &amp")).toBe("hi_^a&unknown; &amp");
  });

  it("decode backslash escapes", () => {
    expect(decodeBackslashEscapes("\\x68\\u0069\\u{21}\\077\\n")).toBe("hi!?\\n");
  });
});
