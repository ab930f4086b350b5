// The agent's workplace, measured: what Fleet's egress proxy (behind the sandbox's forwarder) adds to
// each request an agent or a setup step makes to an allowed host, and how long a setup cache hit takes
// to put a node_modules-sized folder back in a worktree.
// `tsx bench/workplace.ts` prints and saves bench/results/workplace.json; `npm run bench` includes it.
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { networkPolicyOf } from "../src/core/network-policy.ts";
import { startEgressProxy } from "../src/worker/sandbox/egress-proxy.ts";
import { defaultForwarder, forwarderCommand } from "../src/worker/sandbox/network.ts";
import { restoreSetupCache, saveSetupCache } from "../src/worker/workspace/setup-cache.ts";

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const round = (n: number, d = 3) => +n.toFixed(d);

/** One GET, straight to `port` or as an absolute-form request to a proxy at `proxyPort`. */
function get(url: string, via?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request(
      via
        ? { host: "127.0.0.1", port: via, path: url, headers: { host: u.host }, agent: false }
        : { host: u.hostname, port: u.port, path: u.pathname, agent: false },
      (res) => {
        res.resume();
        res.on("end", () => resolve());
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const freePort = async () => {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
};

/** The proxy's added latency: the same request to a loopback upstream, direct and through forwarder + proxy. */
async function proxyLatency(requests: number) {
  const upstream: Server = createServer((_req, res) => res.end("ok\n"));
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const port = (upstream.address() as AddressInfo).port;
  const dir = await mkdtemp(join(tmpdir(), "fleet-bench-proxy-"));
  const proxy = await startEgressProxy({
    policy: networkPolicyOf({ allow: [`registry.test:${port}`], registries: false }),
    socketPath: join(dir, "proxy.sock"),
    hosts: { "registry.test": "127.0.0.1" },
  });
  // The forwarder as a sandbox runs it (here on the host's loopback, on a free port), holding `sleep`.
  const forwarderPort = await freePort();
  const command = forwarderCommand(
    defaultForwarder(),
    [{ port: forwarderPort, socket: join(dir, "proxy.sock") }],
    "/bin/sleep",
    ["3600"],
    process.execPath,
  );
  const forwarder = spawn(command.file, command.args, { stdio: "ignore" });
  try {
    for (let i = 0; i < 100; i++) {
      try {
        await get(`http://registry.test:${port}/warm`, forwarderPort);
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const direct: number[] = [];
    const proxied: number[] = [];
    for (let i = 0; i < requests; i++) {
      let t = performance.now();
      await get(`http://127.0.0.1:${port}/x`);
      direct.push(performance.now() - t);
      t = performance.now();
      await get(`http://registry.test:${port}/x`, forwarderPort);
      proxied.push(performance.now() - t);
    }
    const added = proxied.map((p, i) => p - direct[i]!);
    return {
      requests,
      directP50Ms: round(quantile(direct, 0.5)),
      proxiedP50Ms: round(quantile(proxied, 0.5)),
      addedP50Ms: round(Math.max(0, quantile(added, 0.5))),
      addedP99Ms: round(Math.max(0, quantile(added, 0.99))),
    };
  } finally {
    forwarder.kill("SIGKILL");
    await proxy.close();
    await new Promise<void>((r) => upstream.close(() => r()));
    await rm(dir, { recursive: true, force: true });
  }
}

/** A setup cache hit: `files` small files in nested folders put back into a fresh worktree. */
async function setupCacheHit(files: number) {
  const root = await mkdtemp(join(tmpdir(), "fleet-bench-cache-"));
  const made = join(root, "made");
  const work = join(root, "work");
  try {
    const content = "module.exports = function () { return 'x'.repeat(64); };\n".repeat(30);
    for (let i = 0; i < files; i++) {
      const dir = join(made, "node_modules", `pkg-${Math.floor(i / 20)}`, "lib");
      if (i % 20 === 0) await mkdir(dir, { recursive: true });
      await writeFile(join(dir, `f${i % 20}.js`), content);
    }
    const bytes = Number((await execa("du", ["-sb", join(made, "node_modules")])).stdout.split(/\s/)[0]);
    let t = performance.now();
    await saveSetupCache(root, "bench/repo", "key", made, ["node_modules"]);
    const saveMs = performance.now() - t;
    await mkdir(work);
    t = performance.now();
    const hit = await restoreSetupCache(root, "bench/repo", "key", work, ["node_modules"]);
    const restoreMs = performance.now() - t;
    if (!hit) throw new Error("the cache was not restored");
    return {
      files,
      megabytes: round(bytes / (1 << 20), 1),
      saveMs: round(saveMs, 1),
      hitMs: round(restoreMs, 1),
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

export async function runWorkplaceBench(opts: { requests?: number; files?: number } = {}) {
  return {
    proxy: await proxyLatency(opts.requests ?? 400),
    setupCache: await setupCacheHit(opts.files ?? 20_000),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runWorkplaceBench();
  console.log(JSON.stringify(r, null, 2));
  await writeFile(join(import.meta.dirname, "results", "workplace.json"), `${JSON.stringify(r, null, 2)}\n`);
}
