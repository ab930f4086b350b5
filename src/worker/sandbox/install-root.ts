import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let root: string | undefined;

/**
 * The folder Fleet is installed in (its package.json names "fleet"): the app's `.env` and private key
 * live there, so no sandbox is shown it. Found from this module's own file, in the sources and in the
 * bundles alike (the Action's CommonJS bundle defines `import.meta.url` from `__filename`).
 */
export function fleetInstallRoot(): string {
  root ??= findInstallRoot(dirname(fileURLToPath(import.meta.url)));
  return root;
}

function findInstallRoot(start: string): string {
  for (let dir = start; dirname(dir) !== dir; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (!existsSync(manifest)) continue;
    try {
      if ((JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "fleet") return dir;
    } catch {
      // not a package of ours
    }
  }
  return start;
}
