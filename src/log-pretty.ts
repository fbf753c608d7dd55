import type { DestinationStream } from 'pino';

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const ERROR_LEVEL = 50;
/** Shown in the line's head (or not at all: pid and hostname say nothing on a terminal). */
const HEAD_FIELDS = new Set(['time', 'level', 'msg', 'component', 'pid', 'hostname']);
const BARE_VALUE = /^[^\s"=\\]+$/;

/** A pino destination writing each record as one readable line (see `prettyLine`) to `destination`. */
export function prettyStream(destination: DestinationStream): DestinationStream {
  return { write: (line: string) => destination.write(prettyLine(line)) };
}

/**
 * One pino JSON line as `<ISO time> <LEVEL> [component] message key=value …`: strings with spaces,
 * quotes or `=` and all objects are JSON, `err` is `"<type>: <message>"` with its stack from `ERROR` up.
 * A line that is not a JSON object is passed through.
 */
export function prettyLine(json: string): string {
  const record = parseRecord(json);
  if (record === null) return json.endsWith('\n') ? json : `${json}\n`;
  const level = typeof record['level'] === 'number' ? record['level'] : 0;
  const time = typeof record['time'] === 'number' ? new Date(record['time']).toISOString() : '-';
  const head = [time, (LEVEL_NAMES[level] ?? String(record['level'])).padEnd(5)];
  if (typeof record['component'] === 'string') head.push(`[${record['component']}]`);
  if (typeof record['msg'] === 'string') head.push(record['msg']);
  const fields: string[] = [];
  for (const [key, value] of Object.entries(record)) {
    if (HEAD_FIELDS.has(key)) continue;
    if (key === 'err' && isRecord(value)) fields.push(...errorFields(value, level >= ERROR_LEVEL));
    else fields.push(`${key}=${formatValue(value)}`);
  }
  return `${[...head, ...fields].join(' ')}\n`;
}

function parseRecord(json: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(json);
    return isRecord(value) ? value : null;
  } catch {
    // Not JSON (a raw write to the stream): the caller passes it through unchanged.
    return null;
  }
}

function errorFields(err: Record<string, unknown>, withStack: boolean): string[] {
  const type = typeof err['type'] === 'string' ? err['type'] : 'Error';
  const message = typeof err['message'] === 'string' ? err['message'] : '';
  const fields = [`err=${formatValue(`${type}: ${message}`)}`];
  if (withStack && typeof err['stack'] === 'string') fields.push(`err.stack=${JSON.stringify(err['stack'])}`);
  return fields;
}

function formatValue(value: unknown): string {
  if (typeof value === 'string') return BARE_VALUE.test(value) ? value : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  // Parsed from JSON, so never undefined or a function.
  return JSON.stringify(value) ?? 'undefined';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
