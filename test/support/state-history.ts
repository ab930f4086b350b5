import { execa } from "execa";
import { type FleetStateDoc, parseStateDoc } from "../../src/core/state-doc.ts";

/** Every commit of the state branch in a bare repository, oldest first, with the state it holds. */
export async function stateHistory(
  gitDir: string,
  branch = "fleet/state",
): Promise<Array<{ sha: string; doc: FleetStateDoc }>> {
  const shas = (await execa("git", ["--git-dir", gitDir, "rev-list", "--reverse", branch])).stdout
    .split("\n")
    .filter(Boolean);
  // One `git cat-file --batch` for all of them: "<sha> blob <size>\n<content>\n" per request.
  const out = (
    await execa("git", ["--git-dir", gitDir, "cat-file", "--batch"], {
      input: shas.map((s) => `${s}:.fleet/state.json`).join("\n"),
      encoding: "buffer",
    })
  ).stdout as Uint8Array;
  const buf = Buffer.from(out);
  const docs: Array<{ sha: string; doc: FleetStateDoc }> = [];
  let at = 0;
  for (const sha of shas) {
    const eol = buf.indexOf(10, at);
    const header = buf.subarray(at, eol).toString("utf8");
    const size = Number(/ blob (\d+)$/.exec(header)?.[1] ?? Number.NaN);
    if (!Number.isFinite(size)) throw new Error(`no state file in ${sha}: ${header}`);
    const text = buf.subarray(eol + 1, eol + 1 + size).toString("utf8");
    docs.push({ sha, doc: parseStateDoc(text, sha, "") });
    at = eol + 1 + size + 1;
  }
  return docs;
}

/** How many times each task entered `dispatched` over the history (a new run each time). */
export function dispatchCounts(history: Array<{ doc: FleetStateDoc }>): Map<string, number> {
  const counts = new Map<string, number>();
  let prev: FleetStateDoc | undefined;
  for (const { doc } of history) {
    for (const t of Object.values(doc.tasks)) {
      const before = prev?.tasks[t.id];
      const entered =
        t.state === "dispatched" && (before?.state !== "dispatched" || before.attempts !== t.attempts);
      if (entered) counts.set(t.id, (counts.get(t.id) ?? 0) + 1);
    }
    prev = doc;
  }
  return counts;
}
