// Loaded into a `fleet run` process (NODE_OPTIONS=--import ...): writes every fetch and push of its git
// state store (STATE_GIT_CHANNEL, src/state/git-store.ts) to $FLEET_BENCH_OPS_LOG, one JSON line each,
// with the time (epoch ms) and the process, so a benchmark can tell polls from claims and count the
// pushes the branch refused.
import { subscribe } from "node:diagnostics_channel";
import { appendFileSync } from "node:fs";

const file = process.env.FLEET_BENCH_OPS_LOG;
if (file) {
  subscribe("fleet:state:git", (m) => {
    const t = performance.timeOrigin + performance.now();
    appendFileSync(file, `${JSON.stringify({ t, pid: process.pid, ...m })}\n`);
  });
}
