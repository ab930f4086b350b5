import { parseArgs } from "node:util";
import { startGitHubEmulator } from "./index.ts";

// `npm start -w @fleet/github-emulator -- --port 3000 [--webhook-url URL] [--repo owner/name ...]`
// prints one JSON line (url, oidcIssuer, appId, privateKey, webhookSecret, repos) and serves until killed.
const { values } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    "webhook-url": { type: "string" },
    "webhook-secret": { type: "string" },
    "data-dir": { type: "string" },
    repo: { type: "string", multiple: true, default: [] },
    collaborator: { type: "string", multiple: true, default: [] },
    "no-validate": { type: "boolean", default: false },
  },
});

const em = await startGitHubEmulator({
  port: Number(values.port),
  webhookUrl: values["webhook-url"],
  webhookSecret: values["webhook-secret"],
  dataDir: values["data-dir"],
  validate: !values["no-validate"],
});
const repos = [];
for (const full of values.repo ?? []) {
  const [owner, name] = full.split("/");
  if (!owner || !name) throw new Error(`--repo wants owner/name, got ${full}`);
  repos.push(await em.createRepo({ owner, name, files: { "README.md": `# ${name}\n` } }));
}
// --collaborator owner/name:login:permission
for (const spec of values.collaborator ?? []) {
  const [full, login, permission] = spec.split(":");
  em.addCollaborator(full!, login!, (permission ?? "write") as "write");
}
const tokens = Object.fromEntries(
  (values.collaborator ?? []).map((s) => s.split(":")[1]!).map((login) => [login, em.userToken(login)]),
);
process.stdout.write(
  `${JSON.stringify({ url: em.url, oidcIssuer: em.oidcIssuer, appId: em.appId, privateKey: em.privateKey, webhookSecret: em.webhookSecret, dataDir: em.dataDir, repos, tokens })}\n`,
);

const shutdown = () => {
  em.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
