import { pino } from 'pino';
import type { DestinationStream, LogFn, Logger } from 'pino';
import { loadLogFormat, type LogFormat, type LogLevel } from './config/index.ts';
import { prettyStream } from './log-pretty.ts';
import { redactTokens } from './security/redact.ts';

export interface LoggerSettings {
  /** Line format. @default `LOG_FORMAT` from the environment, else `auto` */
  readonly format?: LogFormat;
  /** Where the lines go. @default stderr, so stdout stays free for command output */
  readonly destination?: DestinationStream;
  /** Whether the destination is a terminal (`auto` picks `pretty` for one). @default process.stderr.isTTY */
  readonly terminal?: boolean;
}

/**
 * The process logger: JSON lines, or one readable line per record (`pretty`). A record never holds
 * a key twice (see `withoutRepeatedKeys`), and token query values in logged strings are masked.
 */
export function createLogger(level: LogLevel, base: Record<string, unknown> = {}, settings: LoggerSettings = {}): Logger {
  const format = settings.format ?? loadLogFormat();
  const pretty = format === 'pretty' || (format === 'auto' && (settings.terminal ?? process.stderr.isTTY === true));
  const destination = settings.destination ?? pino.destination(2);
  return pino(
    {
      level,
      base: { ...base },
      redact: ['*.token', '*.secret', '*.password'],
      hooks: { logMethod: withoutRepeatedKeys },
      formatters: { log: redactTokenStrings },
    },
    pretty ? prettyStream(destination) : destination,
  );
}

/** Bindings of each logger, parsed once: pino keeps them as a serialized string. */
const boundKeys = new WeakMap<Logger, Record<string, unknown>>();

function bindingsOf(logger: Logger): Record<string, unknown> {
  let bound = boundKeys.get(logger);
  if (bound === undefined) {
    bound = logger.bindings();
    boundKeys.set(logger, bound);
  }
  return bound;
}

/**
 * pino writes a child's bindings and the call's fields side by side, so a key set by both appears
 * twice. The call's copy is dropped when it repeats the binding, and kept as `call.<key>` when it
 * differs (another coordinator's id, say), so that neither value is lost.
 */
function withoutRepeatedKeys(this: Logger, args: Parameters<LogFn>, method: LogFn): void {
  const [fields] = args;
  if (typeof fields === 'object' && fields !== null && !(fields instanceof Error)) {
    const bound = bindingsOf(this);
    const entries = Object.entries(fields);
    if (entries.some(([key]) => key in bound)) {
      const kept: Record<string, unknown> = {};
      for (const [key, value] of entries) {
        if (!(key in bound)) kept[key] = value;
        else if (!sameValue(bound[key], value)) kept[`call.${key}`] = value;
      }
      args[0] = kept;
    }
  }
  method.apply(this, args);
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  return typeof a === 'object' && typeof b === 'object' && JSON.stringify(a) === JSON.stringify(b);
}

/** URLs and request targets are logged with their token query values masked. */
function redactTokenStrings(fields: Record<string, unknown>): Record<string, unknown> {
  let masked: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value !== 'string') continue;
    const redacted = redactTokens(value);
    if (redacted === value) continue;
    masked ??= { ...fields };
    masked[key] = redacted;
  }
  return masked ?? fields;
}
