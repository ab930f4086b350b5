import { describe, expect, it } from "vitest";
import {
  type BeadIssue,
  goJson,
  normalizeTime,
  parseJsonl,
  rewriteJsonl,
  serializeIssue,
} from "../../src/beads/index.ts";
import { FIXTURE_FILES, readFixture } from "./helpers.ts";

const base = (over: Partial<BeadIssue> = {}): BeadIssue => ({
  id: "fl-a1b2",
  title: "Fix it",
  status: "open",
  priority: 2,
  issue_type: "task",
  created_at: "2026-01-02T03:04:05Z",
  updated_at: "2026-01-02T03:04:05Z",
  ...over,
});

describe("serializeIssue writes beads' export format", () => {
  it("re-serializes every 1.x fixture record to its exact bytes", () => {
    for (const file of [FIXTURE_FILES.head, FIXTURE_FILES.tombstone]) {
      for (const record of parseJsonl(readFixture(file)).records) {
        expect(serializeIssue(record.issue)).toBe(record.raw);
      }
    }
  });

  it("re-serializes the Dec 2025 export to its exact bytes, including Go's \\u003c escapes", () => {
    const records = parseJsonl(readFixture(FIXTURE_FILES.dec2025)).records;
    const differing = records.filter((r) => serializeIssue(r.issue) !== r.raw);
    // The only difference: pre-1.0 structs wrote description without omitempty; 1.x omits "".
    expect(differing).toHaveLength(14);
    for (const r of differing) {
      expect(r.issue.description).toBe("");
      const ours = serializeIssue(r.issue);
      const titleEnd = ours.indexOf(',"status"');
      expect(`${ours.slice(0, titleEnd)},"description":""${ours.slice(titleEnd)}`).toBe(r.raw);
    }
  });

  it("writes fields in Go struct order whatever the object's key order", () => {
    const issue = {
      updated_at: "2026-01-02T03:04:05Z",
      priority: 1,
      title: "T",
      id: "fl-x",
      created_at: "2026-01-01T00:00:00Z",
    };
    expect(serializeIssue(issue as BeadIssue)).toBe(
      '{"id":"fl-x","title":"T","priority":1,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-02T03:04:05Z"}',
    );
  });

  it("always writes priority, even 0", () => {
    expect(serializeIssue(base({ priority: 0 }))).toContain('"priority":0');
  });

  it("omits empty strings, empty arrays and absent or zero optional times", () => {
    const line = serializeIssue(
      base({
        description: "",
        notes: "",
        assignee: "",
        labels: [],
        dependencies: [],
        comments: [],
        closed_at: undefined,
        started_at: "0001-01-01T00:00:00Z",
        pinned: false,
      }),
    );
    expect(line).toBe(
      '{"id":"fl-a1b2","title":"Fix it","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}',
    );
  });

  it("writes times as Go's RFC3339Nano: trailing zeros trimmed, Z for UTC, offsets kept", () => {
    expect(normalizeTime("2026-01-02T03:04:05.120000Z")).toBe("2026-01-02T03:04:05.12Z");
    expect(normalizeTime("2026-01-02T03:04:05.000Z")).toBe("2026-01-02T03:04:05Z");
    expect(normalizeTime("2026-01-02T03:04:05+00:00")).toBe("2026-01-02T03:04:05Z");
    expect(normalizeTime("2025-11-29T00:36:18.034782016-07:00")).toBe("2025-11-29T00:36:18.034782016-07:00");
    expect(serializeIssue(base({ created_at: "2026-01-02T03:04:05.500Z" }))).toContain(
      '"created_at":"2026-01-02T03:04:05.5Z"',
    );
  });

  it("keeps unknown fields after the known ones", () => {
    const line = serializeIssue(base({ zz_custom: { a: 1 }, external_ref: "gh-7" }));
    expect(line.endsWith(',"external_ref":"gh-7","zz_custom":{"a":1}}')).toBe(true);
  });

  it("writes dependencies and comments in their struct order", () => {
    const line = serializeIssue(
      base({
        dependencies: [
          { created_at: "2026-01-01T00:00:00Z", type: "blocks", depends_on_id: "fl-b", issue_id: "fl-a1b2" },
        ],
        comments: [
          { text: "hi", id: "c1", author: "me", issue_id: "fl-a1b2", created_at: "2026-01-01T00:00:00Z" },
        ],
      }),
    );
    expect(line).toContain(
      '"dependencies":[{"issue_id":"fl-a1b2","depends_on_id":"fl-b","type":"blocks","created_at":"2026-01-01T00:00:00Z"}]',
    );
    expect(line).toContain(
      '"comments":[{"id":"c1","issue_id":"fl-a1b2","author":"me","text":"hi","created_at":"2026-01-01T00:00:00Z"}]',
    );
  });

  it("escapes like Go's json.Marshal", () => {
    expect(goJson("a<b>&c\u2028")).toBe('"a\\u003cb\\u003e\\u0026c\\u2028"');
    expect(goJson("tab\tnl\n")).toBe('"tab\\tnl\\n"');
  });
});

describe("rewriteJsonl", () => {
  it("round-trips every fixture byte for byte when nothing changes", () => {
    for (const file of Object.values(FIXTURE_FILES)) {
      const text = readFixture(file);
      expect(rewriteJsonl(text, { upsert: [] })).toBe(text);
    }
  });

  it("round-trips when the same issues are upserted unchanged", () => {
    const text = readFixture(FIXTURE_FILES.dec2025);
    const issues = parseJsonl(text).records.map((r) => structuredClone(r.issue));
    expect(rewriteJsonl(text, { upsert: issues })).toBe(text);
  });

  it("re-serializes only the changed record", () => {
    const text = readFixture(FIXTURE_FILES.dec2025);
    const parsed = parseJsonl(text);
    const target = structuredClone(parsed.records[10]!.issue);
    target.status = "in_progress";
    const out = rewriteJsonl(text, { upsert: [target] });
    const before = text.split("\n");
    const after = out.split("\n");
    expect(after).toHaveLength(before.length);
    const changed = after.map((line, i) => (line === before[i] ? -1 : i)).filter((i) => i >= 0);
    expect(changed).toEqual([10]);
    expect(after[10]).toContain('"status":"in_progress"');
  });

  it("inserts new records in id order in a sorted file", () => {
    const text = readFixture(FIXTURE_FILES.dec2025);
    const out = rewriteJsonl(text, { upsert: [base({ id: "bd-0aaa" }), base({ id: "bd-zzzz" })] });
    const ids = parseJsonl(out).records.map((r) => r.issue.id);
    expect(ids).toHaveLength(106);
    expect([...ids].sort()).toEqual(ids);
    expect(out.endsWith("\n")).toBe(true);
  });

  it("appends new records in id order to an unsorted file", () => {
    const text = `${serializeIssue(base({ id: "fl-b" }))}\n${serializeIssue(base({ id: "fl-a" }))}\n`;
    const out = rewriteJsonl(text, { upsert: [base({ id: "fl-d" }), base({ id: "fl-c" })] });
    expect(parseJsonl(out).records.map((r) => r.issue.id)).toEqual(["fl-b", "fl-a", "fl-c", "fl-d"]);
  });

  it("removes records", () => {
    const text = readFixture(FIXTURE_FILES.tombstone);
    const out = rewriteJsonl(text, { upsert: [], remove: ["bd-test1"] });
    expect(out).toBe(`${text.split("\n")[0]}\n`);
  });

  it("keeps malformed lines as they are", () => {
    const good = serializeIssue(base({ id: "fl-a" }));
    const text = `${good}\n{"id":"fl-b", broken\n  \n`;
    const out = rewriteJsonl(text, { upsert: [base({ id: "fl-a", title: "New" }), base({ id: "fl-c" })] });
    const lines = out.split("\n");
    expect(lines[1]).toBe('{"id":"fl-b", broken');
    expect(lines[2]).toBe("  ");
    expect(lines[0]).toContain('"title":"New"');
    expect(lines[3]).toContain('"id":"fl-c"');
  });

  it("keeps a tombstone's bytes when other records change", () => {
    const text = readFixture(FIXTURE_FILES.tombstone);
    const live = structuredClone(parseJsonl(text).records[1]!.issue);
    live.title = "Renamed";
    const out = rewriteJsonl(text, { upsert: [live] });
    expect(out.split("\n")[0]).toBe(text.split("\n")[0]);
    expect(out.split("\n")[1]).toContain('"title":"Renamed"');
  });

  it("writes a newline-terminated file when changing an unterminated one", () => {
    const text = serializeIssue(base({ id: "fl-a" }));
    expect(rewriteJsonl(text, { upsert: [] })).toBe(text);
    expect(rewriteJsonl(text, { upsert: [base({ id: "fl-b" })] }).endsWith("}\n")).toBe(true);
  });

  it("keeps unknown fields of a changed record", () => {
    const text = readFixture(FIXTURE_FILES.head);
    const issue = structuredClone(parseJsonl(text).records[0]!.issue);
    issue.status = "closed";
    issue.closed_at = "2026-04-19T00:00:00Z";
    const out = rewriteJsonl(text, { upsert: [issue] });
    expect(out).toContain('"closed_at":"2026-04-19T00:00:00Z"');
    expect(out).toContain('"dependency_count":0,"dependent_count":0,"comment_count":0}');
  });
});
