import { describe, expect, it } from "vitest";
import {
  emptyStateDoc,
  parseStateDoc,
  StateCorruptError,
  serializeStateDoc,
} from "../../src/core/state-doc.ts";
import { newTask } from "../../src/core/task.ts";
import { stateBranchRemedy } from "../../src/state/store.ts";

const WHERE = "fleet/state:.fleet/state.json";
const REMEDY = stateBranchRemedy("fleet/state");
const task = newTask({
  id: "fl-a1",
  repo: "octo/widgets",
  issue: 12,
  title: "Add a cache",
  coder: "claude",
  model: "sonnet",
  now: "2026-01-01T00:00:00Z",
});
const docWith = (t: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ ...emptyStateDoc(), tasks: { "fl-a1": t }, ...extra });

const corrupt = (text: string): StateCorruptError => {
  try {
    parseStateDoc(text, WHERE, REMEDY);
  } catch (error) {
    if (error instanceof StateCorruptError) return error;
    throw error;
  }
  throw new Error("expected StateCorruptError");
};

describe("the state document schema", () => {
  it("reads a document Fleet wrote, keeping fields it does not know", () => {
    const text = docWith(
      { ...task, futureField: { x: 1 } },
      { dashboard: { issue: 3 }, replies: { "12:mallory": 1 } },
    );
    const doc = parseStateDoc(text, WHERE, REMEDY);
    expect(doc.tasks["fl-a1"]).toMatchObject({ id: "fl-a1", futureField: { x: 1 } });
    expect(doc.dashboard).toEqual({ issue: 3 });
    expect(serializeStateDoc(doc)).toBe(serializeStateDoc(JSON.parse(text)));
  });

  it.each([
    [{ ...task, state: "exploded" }, 'task "fl-a1", field "state"', '"exploded"'],
    [
      {
        ...task,
        state: "dispatched",
        lease: {
          holder: "w",
          slot: -1,
          acquiredAt: task.createdAt,
          heartbeatAt: task.createdAt,
          expiresAt: task.createdAt,
        },
      },
      'task "fl-a1", field "lease.slot"',
      "got -1",
    ],
    [(({ id: _id, ...rest }) => rest)(task), 'task "fl-a1", field "id"', "it is missing"],
    [{ ...task, id: "fl-zz" }, 'task "fl-a1", field "id"', 'must be the record\'s key "fl-a1"'],
    [{ ...task, issue: "12" }, 'task "fl-a1", field "issue"', 'got "12"'],
    [{ ...task, priority: 9 }, 'task "fl-a1", field "priority"', "got 9"],
    [{ ...task, createdAt: "yesterday" }, 'task "fl-a1", field "createdAt"', "RFC3339"],
    [
      { ...task, pin: { sha256: "abc", at: task.createdAt, by: "mona" } },
      'task "fl-a1", field "pin.sha256"',
      "hex",
    ],
    ["not a record", 'task "fl-a1"', '"not a record"'],
  ])(
    "rejects a record that parses but is wrong (%#), naming the record and the field",
    (record, where, detail) => {
      const error = corrupt(docWith(record));
      expect(error.detail).toContain(where);
      expect(error.detail).toContain(detail);
      expect(error.remedy).toBe(REMEDY);
      expect(error.message).toContain("Fleet will not overwrite it");
    },
  );

  it("rejects bad ledger entries and reply records", () => {
    const ledger = corrupt(
      JSON.stringify({
        ...emptyStateDoc(),
        ledger: { "2026-01-01": { claude: { runs: -2, usage: {}, costUsd: 0 } } },
      }),
    );
    expect(ledger.detail).toContain('ledger entry "2026-01-01"/"claude", field "runs"');
    const replies = corrupt(JSON.stringify({ ...emptyStateDoc(), replies: { "12:mallory": "soon" } }));
    expect(replies.detail).toContain('reply record "12:mallory"');
  });

  it("still rejects text that is not JSON, or another version", () => {
    expect(corrupt("{ not json").detail).toContain("not valid JSON");
    expect(corrupt(JSON.stringify({ version: 2, tasks: {} })).remedy).toContain("upgrade Fleet");
  });
});
