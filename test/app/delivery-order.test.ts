import { describe, expect, it } from "vitest";
import { DeliveryOrder, scopeOf } from "../../src/app/deliveries.ts";

/** A handler the test finishes by hand, recording when it started and ended. */
function gate(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((r) => {
    finish = r;
  });
  return {
    handle: async () => {
      log.push(`start ${name}`);
      await done;
      log.push(`end ${name}`);
    },
    finish,
  };
}

const tick = () => new Promise((r) => setTimeout(r, 5));

describe("the order deliveries answered on receipt are handled in", () => {
  it("one issue's deliveries one after another; other issues' meanwhile", async () => {
    const order = new DeliveryOrder();
    const log: string[] = [];
    const labeled = gate(log, "#1 labeled");
    const unlabeled = gate(log, "#1 unlabeled");
    const other = gate(log, "#2 labeled");
    const all = [
      order.run({ repo: "o/r", number: 1 }, labeled.handle),
      order.run({ repo: "o/r", number: 1 }, unlabeled.handle),
      order.run({ repo: "o/r", number: 2 }, other.handle),
    ];
    await tick();
    expect(log).toEqual(["start #1 labeled", "start #2 labeled"]);
    other.finish();
    await tick();
    expect(log).not.toContain("start #1 unlabeled");
    labeled.finish();
    await tick();
    expect(log.slice(-2)).toEqual(["end #1 labeled", "start #1 unlabeled"]);
    unlabeled.finish();
    await Promise.all(all);
  });

  it("a repository-wide delivery after every earlier one of the repository, and before every later one", async () => {
    const order = new DeliveryOrder();
    const log: string[] = [];
    const a = gate(log, "#1");
    const b = gate(log, "#2");
    const push = gate(log, "push");
    const c = gate(log, "#3");
    const elsewhere = gate(log, "other repo #1");
    const all = [
      order.run({ repo: "o/r", number: 1 }, a.handle),
      order.run({ repo: "o/r", number: 2 }, b.handle),
      order.run({ repo: "o/r" }, push.handle),
      order.run({ repo: "o/r", number: 3 }, c.handle),
      order.run({ repo: "o/other", number: 1 }, elsewhere.handle),
    ];
    await tick();
    expect(log).toEqual(["start #1", "start #2", "start other repo #1"]);
    a.finish();
    await tick();
    expect(log).not.toContain("start push");
    b.finish();
    await tick();
    expect(log.at(-1)).toBe("start push");
    expect(log).not.toContain("start #3");
    push.finish();
    await tick();
    expect(log.at(-1)).toBe("start #3");
    c.finish();
    elsewhere.finish();
    await Promise.all(all);
  });

  it("a handler that fails does not hold up the next one", async () => {
    const order = new DeliveryOrder();
    const log: string[] = [];
    await order.run({ repo: "o/r", number: 1 }, async () => {
      throw new Error("GitHub answered 500");
    });
    await order.run({ repo: "o/r", number: 1 }, async () => {
      log.push("next");
    });
    expect(log).toEqual(["next"]);
  });

  it("reads the scope from the event: an issue or PR by number, the state branch deleted as a barrier, the rest unordered", () => {
    const repository = { full_name: "Octo/Widgets" };
    expect(scopeOf("issues", { repository, issue: { number: 7 } })).toEqual({
      repo: "octo/widgets",
      number: 7,
    });
    expect(scopeOf("issue_comment", { repository, issue: { number: 9 } })).toEqual({
      repo: "octo/widgets",
      number: 9,
    });
    expect(scopeOf("pull_request", { repository, pull_request: { number: 9 } })).toEqual({
      repo: "octo/widgets",
      number: 9,
    });
    expect(scopeOf("push", { repository, ref: "refs/heads/fleet/state", deleted: true })).toEqual({
      repo: "octo/widgets",
    });
    // Each state commit is a push, and CI runs come and go: as barriers they held up every issue.
    expect(scopeOf("push", { repository, ref: "refs/heads/fleet/state", deleted: false })).toBeUndefined();
    expect(scopeOf("push", { repository, ref: "refs/heads/main", deleted: false })).toBeUndefined();
    expect(scopeOf("workflow_run", { repository, workflow_run: { id: 1 } })).toBeUndefined();
    expect(scopeOf("installation", { installation: { id: 1 } })).toBeUndefined();
  });

  it("an unordered delivery waits for nothing and holds up nothing", async () => {
    const order = new DeliveryOrder();
    const log: string[] = [];
    const slow = gate(log, "#1");
    const first = order.run({ repo: "o/r", number: 1 }, slow.handle);
    await tick();
    await order.run(undefined, async () => {
      log.push("push");
    });
    const after = order.run({ repo: "o/r", number: 2 }, async () => {
      log.push("#2");
    });
    await after;
    expect(log).toEqual(["start #1", "push", "#2"]);
    slow.finish();
    await first;
  });
});
