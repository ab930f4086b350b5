import { labelErrorMarker, noticeMarker } from "./markers.ts";

export function renderLabelError(label: string, message: string, grammarHelp: string): string {
  return [
    labelErrorMarker(label),
    `### ⚠️ Fleet could not use the label \`${label}\``,
    "",
    message,
    "",
    grammarHelp,
    "",
    "Nothing was queued. Remove the label and add a valid one to start a task.",
  ].join("\n");
}

export function renderConfigProblems(
  path: string,
  problems: Array<{ path: string; message: string }>,
): string {
  return [
    noticeMarker("config-invalid"),
    `### ⚠️ Fleet's configuration \`${path}\` is invalid`,
    "",
    "Nothing was queued. Fix these and label the issue again:",
    "",
    ...problems.map((p) => `- \`${p.path}\`: ${p.message}`),
  ].join("\n");
}

export function renderNotAllowed(login: string, roles: readonly string[]): string {
  return [
    noticeMarker(`not-allowed-${login.toLowerCase()}`),
    `### 🔒 Fleet ignored a request from @${login}`,
    "",
    `Only users with one of these roles on this repository can start, approve, cancel or retry Fleet tasks: ${roles.join(", ")}.`,
    "Ask a maintainer to add the label or run the command.",
  ].join("\n");
}
