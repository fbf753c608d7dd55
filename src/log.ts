import { pino } from 'pino';
import type { Logger } from 'pino';
import type { LogLevel } from './config/index.ts';

/** The process logger: JSON lines on stderr, so stdout stays free for command output. */
export function createLogger(level: LogLevel, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { ...base }, redact: ['*.token', '*.secret', '*.password'] }, pino.destination(2));
}
