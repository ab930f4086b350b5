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

  it("reads the scope from the payload: issues and pull requests by number, the rest repository-wide", () => {
    const repository = { full_name: "Octo/Widgets" };
    expect(scopeOf({ repository, issue: { number: 7 } })).toEqual({ repo: "octo/widgets", number: 7 });
    expect(scopeOf({ repository, pull_request: { number: 9 } })).toEqual({ repo: "octo/widgets", number: 9 });
    expect(scopeOf({ repository, ref: "refs/heads/fleet/state" })).toEqual({ repo: "octo/widgets" });
    expect(scopeOf({ installation: { id: 1 } })).toEqual({ repo: "" });
  });
});
