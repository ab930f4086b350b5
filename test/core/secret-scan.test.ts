import { describe, expect, it } from "vitest";
import { REDACTED, redactSecrets } from "../../src/core/redact.ts";
import {
  encodedForms,
  findKnownSecret,
  findTokenShapes,
  scanOutgoing,
  skeletonSpans,
} from "../../src/core/secret-scan.ts";

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
