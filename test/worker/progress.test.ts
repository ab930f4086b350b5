import { describe, expect, it } from "vitest";
import { type Progress, throttleProgress } from "../../src/worker/reports.ts";

describe("throttleProgress", () => {
  it("passes progress at most once per 15 s of the injected clock, state changes at once", async () => {
    let now = 0;
    const seen: Progress[] = [];
    const report = throttleProgress(
      (p) => void seen.push(p),
      () => new Date(now),
    );
    await report({ state: "running", step: "a" });
    now = 5_000;
    await report({ state: "running", step: "b" });
    now = 14_999;
    await report({ state: "running", step: "c" });
    now = 15_000;
    await report({ state: "running", step: "d" });
    now = 16_000;
    await report({ state: "pr-open", step: "e" });
    expect(seen.map((p) => p.step)).toEqual(["a", "d", "e"]);
  });

  it("never lets a failing callback stop the run", async () => {
    const report = throttleProgress(
      () => {
        throw new Error("GitHub down");
      },
      () => new Date(0),
    );
    await expect(report({ state: "running", step: "x" })).resolves.toBeUndefined();
  });
});
