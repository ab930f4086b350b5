import { describe, expect, it } from "vitest";
import { isTombstone, liveIssues, parseDeletionsManifest, parseJsonl } from "../../src/beads/index.ts";
import { FIXTURE_FILES, readFixture } from "./helpers.ts";

describe("parseJsonl on real beads exports", () => {
  it("parses every record of every fixture", () => {
    const dec = parseJsonl(readFixture(FIXTURE_FILES.dec2025));
    const tomb = parseJsonl(readFixture(FIXTURE_FILES.tombstone));
    const head = parseJsonl(readFixture(FIXTURE_FILES.head));
    expect([dec.records.length, tomb.records.length, head.records.length]).toEqual([104, 2, 1]);
    expect([...dec.errors, ...tomb.errors, ...head.errors]).toEqual([]);
  });

  it("keeps each line's raw text", () => {
    const text = readFixture(FIXTURE_FILES.dec2025);
    const parsed = parseJsonl(text);
    expect(`${parsed.records.map((r) => r.raw).join("\n")}\n`).toBe(text);
  });

  it("reads typed fields, dependencies and a pre-1.0 integer comment id", () => {
    const parsed = parseJsonl(readFixture(FIXTURE_FILES.dec2025));
    const withComment = parsed.records.find((r) => r.issue.comments)!.issue;
    expect(withComment.id).toBe("bd-3s8");
    expect(withComment.comments![0]!.id).toBe(1);
    expect(withComment.comments![0]!.author).toBe("stevey");
    const dep = parsed.records.find((r) => r.issue.id === "bd-0e3")!.issue.dependencies![0]!;
    expect(dep).toMatchObject({ issue_id: "bd-0e3", depends_on_id: "bd-63l", type: "discovered-from" });
    expect(parsed.records.every((r) => typeof r.issue.priority === "number")).toBe(true);
  });

  it("marks records with fields Fleet does not model as not known, keeping those fields", () => {
    const [record] = parseJsonl(readFixture(FIXTURE_FILES.head)).records;
    expect(record!.known).toBe(false);
    expect(record!.issue.dependency_count).toBe(0);
    expect(record!.issue.owner).toBe("maphew@gmail.com");
    const dec = parseJsonl(readFixture(FIXTURE_FILES.dec2025));
    expect(dec.records.every((r) => r.known)).toBe(true);
  });
});

describe("malformed lines", () => {
  it("are reported with line numbers, never thrown", () => {
    const text = [
      '{"id":"fl-1","title":"a","priority":2,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}',
      "{not json",
      "[1,2]",
      '{"title":"no id"}',
      "",
      '{"id":"fl-2","title":"b","priority":2,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}',
    ].join("\n");
    const parsed = parseJsonl(`${text}\n`);
    expect(parsed.records.map((r) => r.issue.id)).toEqual(["fl-1", "fl-2"]);
    expect(parsed.errors.map((e) => e.line)).toEqual([2, 3, 4]);
    expect(parsed.errors[0]!.message).toMatch(/invalid JSON/);
    expect(parsed.errors[1]!.message).toBe("not a JSON object");
    expect(parsed.errors[2]!.message).toMatch(/id/);
    expect(parsed.errors[0]!.raw).toBe("{not json");
  });
});

describe("legacy handling as bd import does", () => {
  it("skips tombstones from the live set", () => {
    const parsed = parseJsonl(readFixture(FIXTURE_FILES.tombstone));
    expect(parsed.records.map((r) => r.issue.id)).toEqual(["bd-6s61", "bd-test1"]);
    expect(isTombstone(parsed.records[0]!.issue)).toBe(true);
    expect(parsed.records[0]!.issue.deleted_at).toBe("2025-12-24T16:25:31.251346-08:00");
    expect(liveIssues(parsed).map((i) => i.id)).toEqual(["bd-test1"]);
  });

  it("reads the deletions manifest into a set of deleted ids", () => {
    const manifest = parseDeletionsManifest(readFixture(FIXTURE_FILES.deletions));
    expect(manifest.entries).toHaveLength(3);
    expect([...manifest.ids]).toEqual(["bd-3pd", "bd-ksc", "bd-360"]);
    expect(manifest.entries[0]).toMatchObject({ by: "stevey", reason: "batch delete" });
    expect(manifest.errors).toEqual([]);
  });

  it("drops ids of the deletions manifest from the live set", () => {
    const parsed = parseJsonl(readFixture(FIXTURE_FILES.tombstone));
    expect(liveIssues(parsed, new Set(["bd-test1"]))).toEqual([]);
  });

  it("reports broken manifest lines", () => {
    const manifest = parseDeletionsManifest('{"id":"a"}\nnope\n{"ts":"x"}\n');
    expect([...manifest.ids]).toEqual(["a"]);
    expect(manifest.errors.map((e) => e.line)).toEqual([2, 3]);
  });
});
