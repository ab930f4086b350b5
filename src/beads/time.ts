/** Parts of an RFC3339 timestamp, kept exact (nanoseconds as digits, the written offset). */
export interface Rfc3339Parts {
  /** "YYYY-MM-DDTHH:MM:SS" as written. */
  wall: string;
  /** Fraction digits as written (may be empty). */
  fraction: string;
  /** Offset from UTC in minutes. */
  offsetMinutes: number;
  /** Seconds since the epoch (whole seconds). */
  epochSeconds: number;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

/** Go's zero time.Time as encoding/json writes it. */
export const GO_ZERO_TIME = "0001-01-01T00:00:00Z";

export function parseRfc3339(text: string): Rfc3339Parts | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac = "", off = "Z"] = m;
  let offsetMinutes = 0;
  if (off !== "Z" && off !== "z") {
    const sign = off.startsWith("-") ? -1 : 1;
    offsetMinutes = sign * (Number(off.slice(1, 3)) * 60 + Number(off.slice(4, 6)));
  }
  const utc = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  // Date.UTC maps years 0-99 to 1900-1999; fix them so Go's zero time (year 1) stays exact.
  const date = new Date(utc);
  if (Number(y) < 100) date.setUTCFullYear(Number(y));
  return {
    wall: `${y}-${mo}-${d}T${h}:${mi}:${s}`,
    fraction: frac,
    offsetMinutes,
    epochSeconds: Math.floor(date.getTime() / 1000) - offsetMinutes * 60,
  };
}

function formatOffset(minutes: number): string {
  if (minutes === 0) return "Z";
  const sign = minutes < 0 ? "-" : "+";
  const abs = Math.abs(minutes);
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}

/**
 * Format as Go's time.Time JSON does (RFC3339Nano): at most 9 fraction digits, trailing zeros
 * trimmed, "Z" for a zero offset. The wall clock and offset are kept as written, so
 * "2025-11-25T14:56:49.13027-08:00" stays byte-identical.
 */
export function formatGoTime(parts: Rfc3339Parts): string {
  const fraction = parts.fraction.slice(0, 9).replace(/0+$/, "");
  return `${parts.wall}${fraction ? `.${fraction}` : ""}${formatOffset(parts.offsetMinutes)}`;
}

/** A timestamp string in Go's RFC3339Nano form; a string that is not RFC3339 is returned unchanged. */
export function normalizeTime(value: string): string {
  const parts = parseRfc3339(value);
  return parts ? formatGoTime(parts) : value;
}

/** A Date as RFC3339Nano in UTC ("2026-01-02T03:04:05.1Z"). */
export function toRfc3339(date: Date): string {
  return normalizeTime(date.toISOString());
}

/** True for Go's zero time in any offset spelling. */
export function isZeroTime(value: string): boolean {
  const parts = parseRfc3339(value);
  return parts !== undefined && parts.epochSeconds === GO_ZERO_EPOCH_SECONDS && !/[1-9]/.test(parts.fraction);
}

/** 0001-01-01T00:00:00Z in Unix seconds. */
const GO_ZERO_EPOCH_SECONDS = -62135596800;

/** Nanoseconds since the epoch, exact (Go's time.UnixNano), for hashing ids. */
export function unixNano(value: string | Date): bigint {
  if (value instanceof Date) return BigInt(value.getTime()) * 1_000_000n;
  const parts = parseRfc3339(value);
  if (!parts) throw new TypeError(`not an RFC3339 timestamp: ${JSON.stringify(value)}`);
  return BigInt(parts.epochSeconds) * 1_000_000_000n + BigInt(parts.fraction.slice(0, 9).padEnd(9, "0"));
}
