// The real Fleet app in a process of its own, so a test can kill it (SIGKILL) in the middle of its
// work. Run as `node --import tsx test/support/app-process.ts '<json options>'`; prints
// `READY <webhook url>` once it listens.
import { startFleetServer } from "../../src/app/server.ts";

const options = JSON.parse(process.argv[2] ?? "{}") as {
  appId: number;
  privateKey: string;
  webhookSecret: string;
  baseUrl: string;
};
const app = await startFleetServer({
  ...options,
  resilient: false,
  logLevel: "fatal",
  trackerIntervalMs: 0,
  reconcileMs: 0,
});
process.stdout.write(`READY ${app.webhookUrl}\n`);
