/** Columns padded to their widest cell, two spaces apart; the first row is the header. */
export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd()).join('\n') + '\n';
}

/** A table cell or a one-line field: whitespace runs (newlines too) made one space, trimmed, at most `max` characters. */
export function oneLine(text: string, max = 160): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

export function formatTime(ms: number | null, none: string): string {
  return ms === null ? none : new Date(ms).toISOString();
}

/** `3s`, `4m`, `2h`, `5d`: how long ago, rounded down to its largest unit. */
export function age(ms: number | null, now = Date.now()): string {
  if (ms === null) return '-';
  return compact(Math.max(0, now - ms));
}

/** A step's or job's duration: `850ms`, `12.3s`, `4m`. */
export function duration(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1_000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  return compact(ms);
}

function compact(ms: number): string {
  const seconds = Math.floor(ms / 1_000);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3_600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3_600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

export function splitList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}
