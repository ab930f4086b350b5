// Credential rotation under load at the model gateway, end to end: four tasks, two at a time, with the
// REAL Claude Code CLI, three credentials whose windows a rate-limited provider reports in Anthropic's
// headers.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ScriptTurn } from "@fleet/model-servers";
import { describe, expect, it } from "vitest";
import { WindowBook } from "../../src/economy/credential-windows.ts";
import { pool, run, startRateLimitedProvider, useGitHub } from "./gateway-harness.ts";

useGitHub();

describe("the model gateway shares the load across a credential pool", () => {
  it("Claude: three credentials under load share it; none is used at 90% of its window while another has room", async () => {
    const home = await mkdtemp(join(tmpdir(), "fleet-gateway-e2e-state-"));
    const provider = await startRateLimitedProvider(100_000);
    try {
      const book = new WindowBook();
      const write = (path: string, i: number): ScriptTurn => ({
        toolUses: [{ name: "Write", input: { file_path: join(path, `L${i}.md`), content: `${i}\n` } }],
        usage: { input_tokens: 2_000, cache_read_input_tokens: 10_000, output_tokens: 0 },
      });
      const task = async (n: number) => {
        const rotation = pool(home, book, ["KEY_A", "KEY_B", "KEY_C"]);
        const first = await rotation.first();
        if (first.kind !== "credential") throw new Error("a credential has room");
        return run(
          "claude",
          (path) => [
            ...[1, 2, 3, 4, 5].map((i) => write(path, i)),
            { text: "Done.", usage: { input_tokens: 0, output_tokens: 0 } },
          ],
          {
            credential: first.credential,
            rotateCredential: rotation.rotate,
            credentialPool: { coder: "claude", book, rotate: rotation.rotate, next: rotation.next },
          },
          { baseUrl: (server) => provider.route(`t${n}`, server.url) },
        );
      };
      const results = [
        ...(await Promise.all([task(1), task(2)])),
        ...(await Promise.all([task(3), task(4)])),
      ];
      for (const r of results) expect(r.outcome.outcome, r.outcome.reason).toBe("pr-opened");
      expect(provider.violations).toEqual([]);
      const used = provider.used();
      expect(Object.keys(used).sort()).toEqual(["KEY_A", "KEY_B", "KEY_C"]);
      expect(Object.values(used).reduce((a, b) => a + b, 0)).toBe(4 * 5 * 12_000);
    } finally {
      await provider.stop();
      await rm(home, { recursive: true, force: true });
    }
  });
});
