import { describe, expect, it } from "vitest";
import { isDiscoveredBead, linkDiscoveredBeads } from "../../src/beads/discovered.ts";
import { parseJsonl } from "../../src/beads/parse.ts";
import { discoveredMarker } from "../../src/core/discovered.ts";
import { newTask } from "../../src/core/task.ts";
import { syncBeads } from "../../src/queue/beads-sync.ts";

const NOW = "2026-03-01T10:00:00Z";
const taskBead = JSON.stringify({
  id: "fl-a3f",
  title: "Parser",
  status: "in_progress",
  priority: 2,
  created_at: "2026-03-01T09:00:00Z",
  updated_at: "2026-03-01T09:00:00Z",
  external_ref: "gh-12",
});
const queuedBead = JSON.stringify({
  id: "fl-q1",
  title: "Queued one",
  status: "open",
  priority: 2,
  created_at: "2026-03-01T09:30:00Z",
  updated_at: "2026-03-01T09:30:00Z",
  external_ref: "gh-21",
});

describe("discovered-from links in beads", () => {
  it("adds a bead for a new issue and an edge to an existing one, both pointing at the task's bead", () => {
    const text = `${taskBead}\n${queuedBead}\n`;
    const out = linkDiscoveredBeads(
      text,
      "fl-a3f",
      [
        { issue: 20, title: "Add tests" },
        { issue: 21, title: "Queued one" },
      ],
      NOW,
    );
    const byRef = new Map(parseJsonl(out).records.map((r) => [r.issue.external_ref, r.issue]));
    const added = byRef.get("gh-20")!;
    expect(added).toMatchObject({
      title: "Add tests",
      status: "open",
      issue_type: "task",
      created_by: "fleet",
    });
    expect(added.id).toMatch(/^fl-/);
    expect(added.dependencies).toEqual([
      {
        issue_id: added.id,
        depends_on_id: "fl-a3f",
        type: "discovered-from",
        created_at: NOW,
        created_by: "fleet",
      },
    ]);
    expect(byRef.get("gh-21")!.id).toBe("fl-q1");
    expect(byRef.get("gh-21")!.dependencies?.map((d) => [d.type, d.depends_on_id])).toEqual([
      ["discovered-from", "fl-a3f"],
    ]);
    // The task's own line keeps its bytes.
    expect(out.split("\n")).toContain(taskBead);
    // Running it again changes nothing.
    expect(
      linkDiscoveredBeads(
        out,
        "fl-a3f",
        [
          { issue: 20, title: "Add tests" },
          { issue: 21, title: "x" },
        ],
        NOW,
      ),
    ).toBe(out);
  });

  it("a task queued later for a discovered issue takes over its bead: one bead per issue, the link kept", () => {
    const linked = linkDiscoveredBeads(`${taskBead}\n`, "fl-a3f", [{ issue: 20, title: "Add tests" }], NOW);
    const task = newTask({
      id: "fl-new1",
      repo: "o/r",
      issue: 20,
      title: "Add tests",
      coder: "claude",
      model: "sonnet",
      now: "2026-03-02T08:00:00Z",
    });
    const out = syncBeads(linked, [task], [task]);
    const forIssue = parseJsonl(out).records.filter((r) => r.issue.external_ref === "gh-20");
    expect(forIssue).toHaveLength(1);
    expect(forIssue[0]!.issue).toMatchObject({ id: "fl-new1", created_at: NOW, status: "open" });
    expect(forIssue[0]!.issue.dependencies).toEqual([
      {
        issue_id: "fl-new1",
        depends_on_id: "fl-a3f",
        type: "discovered-from",
        created_at: NOW,
        created_by: "fleet",
      },
    ]);
    expect(out.split("\n")).toContain(taskBead);
  });

  it("tells a bead of a follow-up Fleet filed (by its discovered-from link or its marker) from any other", () => {
    const linked = linkDiscoveredBeads(
      `${taskBead}\n${queuedBead}\n`,
      "fl-a3f",
      [{ issue: 21, title: "Q" }],
      NOW,
    );
    expect(isDiscoveredBead(linked, "fl-q1")).toBe(true);
    expect(isDiscoveredBead(linked, "fl-a3f")).toBe(false);
    expect(isDiscoveredBead(linked, "fl-none")).toBe(false);
    // Queued before the link was written: the pinned text Fleet wrote still carries the marker.
    const pinned = JSON.stringify({
      ...JSON.parse(queuedBead),
      description: `Discovered while working on #12.\n\nDo it.\n\n${discoveredMarker("fl-a3f", "0123456789abcdef")}`,
    });
    expect(isDiscoveredBead(`${taskBead}\n${pinned}\n`, "fl-q1")).toBe(true);
    // Another kind of dependency is not a discovered-from link.
    const blocked = JSON.stringify({
      ...JSON.parse(queuedBead),
      dependencies: [{ issue_id: "fl-q1", depends_on_id: "fl-a3f", type: "blocks", created_at: NOW }],
    });
    expect(isDiscoveredBead(`${taskBead}\n${blocked}\n`, "fl-q1")).toBe(false);
  });
});
