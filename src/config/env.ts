import { z } from 'zod';
import { parseDuration } from '../../lib/duration.ts';

/** Empty variables (`FOO=` in an env file) count as unset, so the default applies. */
const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (typeof value === 'string' && value.trim() === '' ? undefined : value), schema.optional());

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  optional(
    z
      .string()
      .trim()
      .regex(/^\d+$/, 'must be a whole number')
      .transform(Number)
      .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`)),
  );

const positiveDecimal = optional(
  z
    .string()
    .trim()
    .regex(/^\d+(\.\d+)?$/, 'must be a number')
    .transform(Number)
    .pipe(z.number().min(1, 'must be at least 1')),
);

/** `30d`, `12h`, `90m`, `45s` as ms (lib/duration.ts); `off` when `offAllowed`: never (null). */
const duration = (offAllowed: boolean) =>
  optional(
    z
      .string()
      .trim()
      .transform((text, ctx) => {
        if (offAllowed && text === 'off') return null;
        const ms = parseDuration(text);
        if (ms === null) ctx.addIssue({ code: 'custom', message: `must be a duration such as 30d, 12h, 90m or 45s${offAllowed ? ', or off' : ''}` });
        return ms ?? 0;
      }),
  );

export const url = (protocols: readonly string[]) =>
  optional(
    z
      .string()
      .trim()
      .refine((value) => protocols.some((p) => value.startsWith(`${p}://`)), {
        message: `must be a URL starting with ${protocols.map((p) => `${p}://`).join(' or ')}`,
      }),
  );

const text = optional(z.string().trim());

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `auto`: human-readable lines when stderr is a terminal, JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** The environment variables Switchyard reads, validated one by one (no defaults here). */
export const envSchema = z.object({
  PORT: integer(0, 65_535),
  HOST: text,
  SWITCHYARD_DATA_DIR: text,
  DATABASE_URL: url(['postgres', 'postgresql']),
  SWITCHYARD_EMBEDDED_PG_PORT: integer(1, 65_535),
  REDIS_URL: url(['redis', 'rediss']),
  GITHUB_WEBHOOK_SECRET: text,
  SWITCHYARD_GITHUB_WEBHOOK_SECRET: text,
  SWITCHYARD_ADMIN_TOKEN: text,
  SWITCHYARD_SECRET_KEY: text,
  SWITCHYARD_SECRET_KEY_OLD: text,
  SWITCHYARD_GITHUB_API_URL: url(['http', 'https']),
  SWITCHYARD_PUBLIC_URL: url(['http', 'https']),
  SWITCHYARD_COORDINATOR_ID: optional(
    z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9._:-]{1,200}$/, 'may hold only letters, digits and . _ : - (at most 200)'),
  ),
  SWITCHYARD_LEASE_RENEW_MS: integer(100),
  SWITCHYARD_LEASE_TTL_MS: integer(200),
  SWITCHYARD_SHUTDOWN_DRAIN_MS: integer(0),
  SWITCHYARD_COMMIT_MAX_BATCH: integer(1, 100_000),
  SWITCHYARD_COMMIT_BATCHING: optional(z.enum(['on', 'off'], { message: 'must be "on" or "off"' })),
  SWITCHYARD_AGENT_COMPRESSION: optional(z.enum(['on', 'off'], { message: 'must be "on" or "off"' })),
  SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS: integer(1_000),
  SWITCHYARD_JOB_HEARTBEAT_INTERVAL_MS: integer(1_000),
  SWITCHYARD_STALE_MULTIPLIER: positiveDecimal,
  SWITCHYARD_RECOVERY_WINDOW_MS: integer(0),
  SWITCHYARD_AGENT_SILENT_MS: integer(1_000),
  SWITCHYARD_REPLAY_GRACE_MS: integer(0),
  SWITCHYARD_BLOB_STORE: optional(z.enum(['files', 'postgres'], { message: 'must be files or postgres' })),
  SWITCHYARD_CACHE_QUOTA_BYTES: integer(1),
  SWITCHYARD_CACHE_MAX_ENTRY_BYTES: integer(1),
  SWITCHYARD_QUEUE_TIMEOUT_MS: integer(0),
  SWITCHYARD_MAX_DISPATCH_ATTEMPTS: integer(1, 100),
  SWITCHYARD_INLINE_EVAL_TIMEOUT_MS: integer(1, 60_000),
  SWITCHYARD_RETENTION_RUNS: duration(true),
  SWITCHYARD_RETENTION_DELIVERIES: duration(true),
  SWITCHYARD_RETENTION_INTERVAL: duration(false),
  LOG_LEVEL: optional(z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` })),
  LOG_FORMAT: optional(z.enum(LOG_FORMATS, { message: `must be one of ${LOG_FORMATS.join(', ')}` })),
  SWITCHYARD_AGENT_AUTH: optional(z.enum(['token', 'none'], { message: 'must be token or none' })),
  // Scalers (docs/architecture.md#the-scaler); compiled by src/scaler/config.ts.
  SWITCHYARD_SCALERS: text,
  SWITCHYARD_SCALERS_FILE: text,
  SWITCHYARD_SCALER_LABELS: text,
  SWITCHYARD_SCALER_MAX_AGENTS: integer(0, 10_000),
  SWITCHYARD_SCALER_MAX_CPU: positiveDecimal,
  SWITCHYARD_SCALER_MAX_MEMORY_BYTES: integer(1),
  SWITCHYARD_SCALER_SPAWN_TIMEOUT_MS: integer(1_000),
  SWITCHYARD_SCALER_TOKEN_TTL_MS: integer(60_000),
  SWITCHYARD_SCALER_TICK_MS: integer(50, 60_000),
  SWITCHYARD_SCALER_URL: url(['ws', 'wss']),
  SWITCHYARD_INSTALLATION_ID: optional(
    z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9._-]{1,63}$/, 'may hold only letters, digits and . _ - (at most 63)'),
  ),
});

export type RawEnv = z.infer<typeof envSchema>;
