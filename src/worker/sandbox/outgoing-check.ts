import { findKnownSecret, type LabeledSecret, type SecretHit, scanOutgoing } from "../../core/secret-scan.ts";
import { addedSince } from "../4-publish.ts";
import { gitIn, type WorktreeGitDirs } from "../workspace/git.ts";

/** Changes larger than this are not pushed: they could not be checked in reasonable time. */
export const MAX_CHECKED_CHANGE_BYTES = 64 * 1024 * 1024;

const describe = (hit: SecretHit, where: string) =>
  `Fleet pushed nothing: ${where} gives away a secret, ${hit.label} (${hit.form}). The agent may have been steered by text in the issue; read its log before you retry.`;

/**
 * What leaves an agent's run, checked before anything is pushed or posted: every line the change
 * adds (in every file, binary files read as text, and all files together), the files' names, and
 * the texts Fleet would publish with it (the commit message, the PR body). Known secrets are looked
 * for in the forms of core/secret-scan.ts; a token shape counts when the file did not hold it
 * before. Best effort: an agent that holds a secret can always encode it some other way (compress
 * it, encrypt it), which is why the sandbox and the gateway keep secrets from agents in the first
 * place. Returns why nothing may be pushed, or undefined.
 */
export async function checkOutgoing(
  wt: WorktreeGitDirs,
  startSha: string,
  secrets: readonly LabeledSecret[],
  texts: ReadonlyArray<{ what: string; text: string }>,
): Promise<string | undefined> {
  for (const { what, text } of texts) {
    const hit = scanOutgoing(text, secrets);
    if (hit) return describe(hit, what);
  }
  const files = await addedSince(wt, startSha);
  const size = files.reduce((n, f) => n + f.added.length, 0);
  // Across files too: file names, and a secret split over several files.
  const everything = [
    { what: "the names of the files it adds", text: files.map((f) => f.file).join("\n") },
    { what: "the change as a whole", text: files.map((f) => f.added).join("\n") },
  ];
  if (size > MAX_CHECKED_CHANGE_BYTES)
    return `Fleet pushed nothing: the change adds ${Math.round(size / 1024 / 1024)} MB, more than the ${MAX_CHECKED_CHANGE_BYTES / 1024 / 1024} MB it checks for secrets before a push.`;
  for (const f of files) {
    let hit = scanOutgoing(f.added, secrets, f.before);
    // A token shape the file already held elsewhere (a test fixture, say) is not news: compare with the whole file.
    if (hit?.kind === "shape") hit = scanOutgoing(f.added, secrets, await fileAt(wt, startSha, f.file));
    if (hit) return describe(hit, `\`${f.file}\``);
  }
  for (const { what, text } of everything) {
    const hit = findKnownSecret(text, secrets);
    if (hit) return describe(hit, what);
  }
  return undefined;
}

async function fileAt(wt: WorktreeGitDirs, rev: string, file: string): Promise<string> {
  const r = await gitIn(wt, ["cat-file", "blob", `${rev}:${file}`], { okCodes: [128] });
  return r.exitCode === 0 ? r.stdout : "";
}
