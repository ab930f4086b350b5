import { formatTokens } from "../core/context-windows.ts";
import { type CredentialWindows, DEFAULT_NEAR_LIMIT_PCT, usedShare } from "../core/rate-windows.ts";

// Each credential's rate-limit windows as people read them: `fleet tasks --credentials` (text and
// JSON) and the dashboard's credentials table.

/** One credential of a coder (its name, never its value), its cooling time and what is known of its windows. */
export interface CredentialWindowsRow {
  coder: string;
  name: string;
  coolingUntil?: string;
  windows?: CredentialWindows;
  /** Whether the credential is set where the workers run; absent when that cannot be told from here. */
  set?: boolean;
}

export interface WindowFigures {
  window: string;
  limit: number;
  remaining: number;
  usedPct: number;
  resetsAt: string;
  /** When the provider said so. */
  at: string;
}

/** A credential's windows as figures at `now` (a window past its reset shows 0% used), and its state. */
export function credentialFigures(row: CredentialWindowsRow, now: Date, nearPct = DEFAULT_NEAR_LIMIT_PCT) {
  const windows: WindowFigures[] = Object.entries(row.windows?.windows ?? {})
    .map(([window, w]) => {
      const usedPct = Math.round(usedShare(w, now) * 100);
      const reset = Date.parse(w.resetsAt) > now.getTime();
      return {
        window,
        limit: w.limit,
        remaining: reset ? w.remaining : w.limit,
        usedPct,
        resetsAt: w.resetsAt,
        at: w.at,
      };
    })
    .sort((a, b) => a.window.localeCompare(b.window));
  const cooling = row.coolingUntil !== undefined && Date.parse(row.coolingUntil) > now.getTime();
  const near = windows.some((w) => w.usedPct >= nearPct);
  // A credential no worker here can use is no open credential, whatever its windows say.
  const state = row.set === false ? "not-set" : cooling ? "cooling" : near ? "near-limit" : "open";
  const hourStart = `${now.toISOString().slice(0, 13)}:00:00.000Z`;
  const hour =
    row.windows?.hour?.start === hourStart ? row.windows.hour : { start: hourStart, tokens: 0, requests: 0 };
  return {
    coder: row.coder,
    name: row.name,
    state,
    ...(row.set !== undefined ? { set: row.set } : {}),
    ...(cooling ? { coolingUntil: row.coolingUntil } : {}),
    windows,
    fleetThisHour: { tokens: hour.tokens, requests: hour.requests },
  };
}

const windowCell = (w: WindowFigures) =>
  `${w.window} ${w.usedPct}% used (${formatTokens(w.remaining)} of ${formatTokens(w.limit)} left), resets ${w.resetsAt}`;

const stateCell = (f: ReturnType<typeof credentialFigures>) =>
  f.state === "not-set"
    ? "not set in this environment (fleet run started here cannot use it)"
    : f.state === "cooling"
      ? `cooling until ${f.coolingUntil}`
      : f.state === "near-limit"
        ? "near a limit"
        : "open";

/** `fleet tasks --credentials`: one block per credential, one line per window. */
export function renderCredentialWindowsText(
  rows: readonly CredentialWindowsRow[],
  now: Date,
  nearPct?: number,
): string {
  if (rows.length === 0) return "No credential pools configured.";
  const out: string[] = [];
  for (const row of rows) {
    const f = credentialFigures(row, now, nearPct);
    out.push(
      `${f.coder}  ${f.name}  ${stateCell(f)}  (Fleet this hour: ${formatTokens(f.fleetThisHour.tokens)} tokens, ${f.fleetThisHour.requests} requests)`,
    );
    if (f.windows.length === 0) out.push("    no window reported by the provider yet");
    for (const w of f.windows) out.push(`    ${windowCell(w)}`);
  }
  return out.join("\n");
}

/** The dashboard's credentials table. */
export function renderCredentialWindowsTable(rows: readonly CredentialWindowsRow[], now: Date): string[] {
  const cell = (s: string) => s.replace(/\|/g, "\\|");
  const lines = [
    "| Coder | Credential | State | Windows (used, reset) | Fleet this hour |",
    "|---|---|---|---|---:|",
  ];
  for (const row of rows) {
    const f = credentialFigures(row, now);
    const state =
      f.state === "cooling" ? `🧊 ${stateCell(f)}` : f.state === "near-limit" ? "⚠️ near a limit" : "✅ open";
    const windows = f.windows.length ? f.windows.map(windowCell).join("<br>") : "—";
    lines.push(
      `| ${cell(f.coder)} | \`${cell(f.name)}\` | ${state} | ${cell(windows)} | ${formatTokens(f.fleetThisHour.tokens)} tokens, ${f.fleetThisHour.requests} requests |`,
    );
  }
  return lines;
}
