import { neutraliseMentions } from "../core/published-text.ts";
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
    `### 🔒 Fleet ignored a request from \`@${login}\``,
    "",
    `Only users with one of these roles on this repository can start, approve, cancel or retry Fleet tasks: ${roles.join(", ")}.`,
    "Ask a maintainer to add the label or run the command. (Fleet answers this at most once an hour per person on an issue.)",
  ].join("\n");
}

/** `config set` refused: every problem by key, nothing changed. */
export function renderConfigRefused(problems: ReadonlyArray<{ path: string; message: string }>): string {
  return neutraliseMentions(
    [
      "### ⚠️ Fleet did not change the config",
      "",
      "Nothing was changed (a `config set` applies all its settings or none):",
      "",
      ...problems.map((p) => `- \`${p.path}\`: ${p.message}`),
    ].join("\n"),
  );
}

/** Stored overrides dropped because they no longer apply to `.github/fleet.yml`; the others still apply. */
export function renderOverridesDropped(
  dropped: ReadonlyArray<{ key: string; value: string; message: string }>,
): string {
  return [
    noticeMarker("config-override-dropped"),
    "### ⚠️ Fleet dropped config overrides that no longer apply",
    "",
    "These `config set` overrides stored in the repository state no longer fit `.github/fleet.yml` (it changed, or they were stored by an older Fleet). Each was removed on its own; every other override still applies:",
    "",
    ...dropped.map((o) => `- \`${o.key}=${o.value}\`: ${neutraliseMentions(o.message)}`),
    "",
    "Set them again with `/fleet config set` if they still make sense, within what the file allows.",
  ].join("\n");
}

/** The state document cannot be read: what is wrong with it, that Fleet did nothing, and what to do. */
export function renderStateCorrupt(error: { path: string; detail: string; remedy: string }): string {
  return [
    noticeMarker("state-corrupt"),
    "### 🛑 Fleet's state is unreadable",
    "",
    `\`${error.path}\`: ${neutraliseMentions(error.detail)}.`,
    "",
    "Fleet did nothing for this event and will not overwrite the document. To fix it:",
    `${error.remedy.charAt(0).toUpperCase()}${error.remedy.slice(1)}.`,
    "Then repeat what you did (label the issue again, or run the command again).",
  ].join("\n");
}

/** A labeled issue held at the door by `per_user_daily_tasks`: why, on the issue. */
export function renderQuotaNotice(marker: string, reason: string): string {
  return [marker, "### ⏸️ Fleet did not queue this issue", "", reason].join("\n");
}
