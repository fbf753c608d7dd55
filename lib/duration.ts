const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `30d`, `12h`, `90m`, `45s`, `500ms`, `0s` as milliseconds; null for anything else (a bare number
 * is refused: its unit would be a guess).
 */
export function parseDuration(text: string): number | null {
  const match = /^(\d{1,9})(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) return null;
  return Number(match[1]) * (UNITS[match[2] ?? ''] ?? 0);
}
