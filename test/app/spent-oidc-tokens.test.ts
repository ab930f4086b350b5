// The memory of exchanged OIDC tokens: one exchange per jti, given back when nothing was minted,
// forgotten once the token has expired (the signature check refuses it from then on).
import { describe, expect, it } from "vitest";
import { SpentOidcTokens } from "../../src/app/actions-token.ts";

describe("SpentOidcTokens", () => {
  it("lets a jti be exchanged once, and again only if nothing was minted for it", () => {
    const spent = new SpentOidcTokens();
    expect(spent.take("a", 1_000)).toBe(true);
    // While its exchange runs, a second one waits for nothing: refused.
    expect(spent.take("a", 1_000)).toBe(false);
    spent.giveBack("a");
    expect(spent.take("a", 1_001)).toBe(true);
    spent.spend("a", 1_300);
    expect(spent.take("a", 1_299)).toBe(false);
    expect(spent.take("b", 1_000)).toBe(true);
  });

  it("forgets a jti at its exp: memory holds only tokens that could still be presented", () => {
    const spent = new SpentOidcTokens();
    for (let i = 0; i < 100; i++) {
      expect(spent.take(`t${i}`, 1_000 + i)).toBe(true);
      spent.spend(`t${i}`, 1_000 + i + 300);
    }
    expect(spent.size).toBe(100);
    // 350 seconds after the last issue, all of them have expired.
    expect(spent.take("later", 1_099 + 350)).toBe(true);
    expect(spent.size).toBe(1);
    // Halfway: those issued in the first 50 seconds are gone, the rest are still refused.
    const half = new SpentOidcTokens();
    for (let i = 0; i < 100; i++) {
      half.take(`t${i}`, 1_000);
      half.spend(`t${i}`, 1_000 + i + 300);
    }
    expect(half.take("t10", 1_350)).toBe(true);
    expect(half.take("t60", 1_350)).toBe(false);
    expect(half.size).toBe(50);
  });
});
