import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  adaptiveIdLength,
  childId,
  encodeBase36,
  hashId,
  isChildId,
  newBeadId,
  parentIdOf,
  parseBeadId,
} from "../../src/beads/index.ts";

const input = {
  title: "Add login",
  description: "OAuth",
  creator: "fleet",
  createdAt: "2026-01-02T03:04:05.123456789Z",
};

describe("hash ids", () => {
  it("have the form <prefix>-<base36> with the default prefix fl", () => {
    const id = newBeadId(input, { existing: [] });
    expect(id).toMatch(/^fl-[0-9a-z]{4}$/);
  });

  it("are deterministic from title, description, creator, timestamp and nonce", () => {
    expect(hashId(input, { length: 5, nonce: 0 })).toBe(hashId({ ...input }, { length: 5, nonce: 0 }));
    expect(hashId(input, { length: 5, nonce: 0 })).not.toBe(hashId(input, { length: 5, nonce: 1 }));
    expect(hashId(input, { length: 5, nonce: 0 })).not.toBe(
      hashId({ ...input, createdAt: "2026-01-02T03:04:05.123456788Z" }, { length: 5, nonce: 0 }),
    );
  });

  it("hash sha256 of title|description|creator|unixNano|nonce as beads does", () => {
    const digest = createHash("sha256").update("Add login|OAuth|fleet|1767323045123456789|0").digest();
    expect(hashId(input, { length: 6, nonce: 0, prefix: "bd" })).toBe(
      `bd-${encodeBase36(digest.subarray(0, 4), 6)}`,
    );
  });

  it("use a configurable prefix", () => {
    expect(newBeadId(input, { prefix: "acme", existing: [] })).toMatch(/^acme-[0-9a-z]{4}$/);
  });

  it("grow with the number of issues", () => {
    expect(adaptiveIdLength(0)).toBe(4);
    expect(adaptiveIdLength(983)).toBe(4);
    expect(adaptiveIdLength(984)).toBe(5);
    expect(adaptiveIdLength(5_898)).toBe(5);
    expect(adaptiveIdLength(5_899)).toBe(6);
    expect(adaptiveIdLength(35_390)).toBe(7);
    expect(adaptiveIdLength(212_340)).toBe(8);
    expect(adaptiveIdLength(10_000_000)).toBe(8);
    expect(adaptiveIdLength(100, { minLength: 3 })).toBe(3);
    const existing = Array.from({ length: 1000 }, (_, i) => `fl-x${i}`);
    expect(newBeadId(input, { existing })).toMatch(/^fl-[0-9a-z]{5}$/);
    // Child ids and other prefixes do not count.
    const children = Array.from({ length: 1000 }, (_, i) => `fl-abcd.${i}`);
    expect(newBeadId(input, { existing: children })).toMatch(/^fl-[0-9a-z]{4}$/);
  });

  it("retry with the next nonce on collision", () => {
    const first = hashId(input, { length: 4, nonce: 0 });
    const second = hashId(input, { length: 4, nonce: 1 });
    expect(newBeadId(input, { existing: [first] })).toBe(second);
  });

  it("grow the length when ten nonces collide", () => {
    const taken = Array.from({ length: 10 }, (_, nonce) => hashId(input, { length: 4, nonce }));
    expect(newBeadId(input, { existing: taken })).toBe(hashId(input, { length: 5, nonce: 0 }));
  });

  it("recognize child ids", () => {
    expect(parseBeadId("fl-a3f.2.1")).toEqual({ prefix: "fl", hash: "a3f", children: [2, 1] });
    expect(parseBeadId("bd-main-idj")).toEqual({ prefix: "bd-main", hash: "idj", children: [] });
    expect(parseBeadId("nope")).toBeUndefined();
    expect(isChildId("fl-a3f.2")).toBe(true);
    expect(isChildId("fl-a3f")).toBe(false);
    expect(parentIdOf("fl-a3f.2.1")).toBe("fl-a3f.2");
    expect(parentIdOf("fl-a3f")).toBeUndefined();
    expect(childId("fl-a3f", 3)).toBe("fl-a3f.3");
  });
});
