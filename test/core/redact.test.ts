import { describe, expect, it } from "vitest";
import { REDACTED, redactSecrets, secretRedactor } from "../../src/core/redact.ts";

describe("redactSecrets", () => {
  it("replaces known secret values of 8+ characters, every occurrence", () => {
    expect(redactSecrets("key=hunter2hunter2 again hunter2hunter2", ["hunter2hunter2"])).toBe(
      `key=${REDACTED} again ${REDACTED}`,
    );
  });

  it("replaces a secret spelled out in pieces, also among other pieces, and leaves a text without one as it is", () => {
    const secret = "Zq8vK2mP9xL4wR7t";
    const redact = secretRedactor([secret, "second-secret-value-42"]);
    expect(redact(`a ${secret.match(/.{1,4}/g)!.join("-")} b`)).toBe(`a ${REDACTED} b`);
    expect(redact(`x ${secret.split("").join(" ")} y ${secret.slice(0, 8)}`)).toBe(
      `x ${REDACTED} y ${secret.slice(0, 8)}`,
    );
    const plain = "The agent changed README.md (Zq8v is not the whole secret), tests pass.";
    expect(redact(plain)).toBe(plain);
  });

  it("ignores short known values that would match ordinary text", () => {
    expect(redactSecrets("the cat sat", ["cat", "", "  "])).toBe("the cat sat");
  });

  it("replaces the longer of overlapping secrets whole", () => {
    expect(redactSecrets("abcdefgh12345678", ["abcdefgh", "abcdefgh12345678"])).toBe(REDACTED);
  });

  it.each([
    ["ghp_", `ghp_${"a1B2".repeat(9)}`],
    ["gho_", `gho_${"x".repeat(36)}`],
    ["ghs_", `ghs_${"Z9".repeat(18)}`],
    ["ghu_", `ghu_${"q".repeat(36)}`],
    ["github_pat_", `github_pat_11ABCDEFG0_${"k".repeat(59)}`],
    ["anthropic", "sk-ant-api03-AbC_dEf-123456789012345678901234567890"],
    ["openai", "sk-proj-ABCdef1234567890ABCdef1234567890"],
    ["openai legacy", `sk-${"A".repeat(48)}`],
    ["aws", "AKIAIOSFODNN7EXAMPLE"],
  ])("redacts %s tokens", (_name, token) => {
    const out = redactSecrets(`before ${token} after`, []);
    expect(out).toBe(`before ${REDACTED} after`);
  });

  it("redacts Bearer tokens but keeps the word", () => {
    expect(redactSecrets("Authorization: Bearer eyJhbGciOi.JIUzI1.NiJ9-x", [])).toBe(
      `Authorization: Bearer ${REDACTED}`,
    );
    expect(redactSecrets("bearer abcdefgh1234", [])).toBe(`bearer ${REDACTED}`);
    expect(redactSecrets("a bearer of news", [])).toBe("a bearer of news");
  });

  it("redacts credentials in git URLs", () => {
    expect(redactSecrets("https://x-access-token:ghs_short@github.com/o/r.git", [])).toBe(
      `https://x-access-token:${REDACTED}@github.com/o/r.git`,
    );
    expect(redactSecrets("git clone https://bob:s3cretpw@example.com/r", [])).toBe(
      `git clone https://bob:${REDACTED}@example.com/r`,
    );
    expect(redactSecrets("see https://github.com/o/r and user@example.com", [])).toBe(
      "see https://github.com/o/r and user@example.com",
    );
  });

  it("redacts whole PEM private key blocks", () => {
    const pem = [
      "-----BEGIN RSA PRIVATE KEY-----",
      "MIIEow...",
      "abc==",
      "-----END RSA PRIVATE KEY-----",
    ].join("\n");
    expect(redactSecrets(`key:\n${pem}\ndone`, [])).toBe(`key:\n${REDACTED}\ndone`);
    expect(
      redactSecrets(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY----- x\n-----BEGIN PRIVATE KEY-----\nAA\n-----END PRIVATE KEY-----",
        [],
      ),
    ).toBe(`${REDACTED} x\n${REDACTED}`);
  });

  it("redacts an unterminated key block to the end", () => {
    expect(redactSecrets("ok\n-----BEGIN EC PRIVATE KEY-----\nMHcC\nmore", [])).toBe(`ok\n${REDACTED}`);
  });

  it("leaves ordinary text and near misses alone", () => {
    const text = "sk-short ghp_tooShort AKIA123 task-ant sk-ant- normal log line";
    expect(redactSecrets(text, [])).toBe(text);
  });

  it("handles large logs and adversarial repetition", () => {
    const big = `${"line of log output\n".repeat(50_000)}ghp_${"a".repeat(36)}\n`;
    const out = redactSecrets(big, ["not-present-secret"]);
    expect(out.endsWith(`${REDACTED}\n`)).toBe(true);
    const adversarial =
      "-----BEGIN PRIVATE KEY-----".repeat(20_000) + "sk-".repeat(50_000) + "Bearer ".repeat(50_000);
    expect(redactSecrets(adversarial, []).startsWith(REDACTED)).toBe(true);
  });
});
