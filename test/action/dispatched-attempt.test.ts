// The dispatch (attempt and time) an Actions run is for, read from the job's event payload (GITHUB_EVENT_PATH):
// a run started by hand or by an older workflow, or an unreadable payload, holds its claim to none.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dispatchedFor } from "../../src/action/runner.ts";

describe("dispatchedFor", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-event-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const event = async (name: string, text: string) => {
    const path = join(dir, name);
    await writeFile(path, text);
    return { GITHUB_EVENT_PATH: path };
  };

  it("is the attempt and dispatch time in a workflow_dispatch's correlation_id input", async () => {
    const env = await event(
      "ok.json",
      JSON.stringify({ inputs: { correlation_id: "fl-a1.2.0a1b2c3d01a2255f2e7b" } }),
    );
    expect(dispatchedFor(env, "fl-a1")).toEqual({ attempt: 2, dispatchedAt: 0x1a2255f2e7b });
    expect(dispatchedFor(env, "fl-b2")).toBeUndefined();
    const older = await event(
      "older.json",
      JSON.stringify({ inputs: { correlation_id: "fl-a1.2.0a1b2c3d" } }),
    );
    expect(dispatchedFor(older, "fl-a1")).toEqual({ attempt: 2 });
  });

  it("is undefined without an event file, without the input, or when the file is not JSON", async () => {
    expect(dispatchedFor({}, "fl-a1")).toBeUndefined();
    expect(dispatchedFor({ GITHUB_EVENT_PATH: join(dir, "missing.json") }, "fl-a1")).toBeUndefined();
    expect(dispatchedFor(await event("none.json", JSON.stringify({ inputs: {} })), "fl-a1")).toBeUndefined();
    expect(
      dispatchedFor(await event("push.json", JSON.stringify({ ref: "refs/heads/main" })), "fl-a1"),
    ).toBeUndefined();
    expect(dispatchedFor(await event("bad.json", "{not json"), "fl-a1")).toBeUndefined();
    expect(dispatchedFor(await event("null.json", "null"), "fl-a1")).toBeUndefined();
    expect(dispatchedFor(await event("inputs.json", '{"inputs": "fl-a1.2.0a"}'), "fl-a1")).toBeUndefined();
    expect(
      dispatchedFor(await event("number.json", '{"inputs": {"correlation_id": 2}}'), "fl-a1"),
    ).toBeUndefined();
  });
});
