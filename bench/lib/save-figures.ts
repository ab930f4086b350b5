import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/** `--out=FILE`: a scale benchmark's figures as JSON there too (bench/scale.ts reads them). */
export async function saveFigures(r: unknown): Promise<void> {
  const out = process.argv.find((a) => a.startsWith("--out="))?.slice("--out=".length);
  if (!out) return;
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(r, null, 2)}\n`);
}
