import { serve } from "./serve.ts";

const USAGE = `Usage: fleet <command>

Commands:
  serve     run the Fleet GitHub App (Probot): reads .env, forwards webhooks via smee when WEBHOOK_PROXY_URL is set
`;

export async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  if (command === "serve") {
    await serve();
    return 0;
  }
  process.stderr.write(`fleet: unknown command "${command}".\n\n${USAGE}`);
  return 2;
}

const code = await main(process.argv.slice(2));
if (code !== 0) process.exitCode = code;
