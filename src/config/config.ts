import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type { z } from 'zod';
import { parseMasterKey } from './master-key.ts';
import { ConfigError } from './errors.ts';
import { envSchema, type LogFormat, type LogLevel, type RawEnv } from './env.ts';
import { compileScalerSettings, type ScalerSettings } from './scaler.ts';
import { DEFAULT_REPLAY_MS } from '../../machines/types.ts';

/** Everything the coordinator reads from its environment, validated and with defaults applied. */
export interface CompiledConfig {
  /** HTTP port (`PORT`). @default 8080 */
  readonly port: number;
  /** HTTP bind address (`HOST`). @default '127.0.0.1' */
  readonly host: string;
  /** Absolute data directory (`SWITCHYARD_DATA_DIR`), resolved against the working directory. @default './.switchyard' */
  readonly dataDir: string;
  /** External Postgres (`DATABASE_URL`); when absent an embedded Postgres runs in `<dataDir>/postgres`. @default undefined */
  readonly databaseUrl: string | undefined;
  /**
   * Port of the embedded Postgres on 127.0.0.1 (`SWITCHYARD_EMBEDDED_PG_PORT`, 1–65535); unused with
   * `DATABASE_URL`. @default undefined: the port used last time if free, else any free port
   */
  readonly embeddedPgPort: number | undefined;
  /** Redis for the shared intake queue (`REDIS_URL`); when absent the embedded queue is used. @default undefined */
  readonly redisUrl: string | undefined;
  /**
   * Accepted GitHub webhook secrets, comma-separated for rotation (`SWITCHYARD_GITHUB_WEBHOOK_SECRET`,
   * or `GITHUB_WEBHOOK_SECRET` when the prefixed one is unset). @default []
   */
  readonly githubWebhookSecrets: readonly string[];
  /** GitHub REST API base for lock files and commit statuses (`SWITCHYARD_GITHUB_API_URL`). @default 'https://api.github.com' */
  readonly githubApiUrl: string;
  /**
   * Where users reach this coordinator, for the run links in commit statuses (`SWITCHYARD_PUBLIC_URL`).
   * @default `http://$HOST:$PORT` (a wildcard bind address as loopback)
   */
  readonly publicUrl: string | undefined;
  /** Bearer token for `/api/v1` (`SWITCHYARD_ADMIN_TOKEN`); generated at first start when absent. @default undefined */
  readonly adminToken: string | undefined;
  /**
   * Master key of stored secrets (`SWITCHYARD_SECRET_KEY`, 32 bytes as hex or base64). Without it an embedded
   * coordinator generates one into `<dataDir>/secret-key` (docs/http-api.md#secrets); with `DATABASE_URL`
   * secrets are unavailable. @default undefined
   */
  readonly secretKey: Buffer | undefined;
  /** The master key being retired (`SWITCHYARD_SECRET_KEY_OLD`): tried on decrypt until rotate-key re-encrypts. @default undefined */
  readonly secretKeyOld: Buffer | undefined;
  /** Identity of this coordinator's lease (`SWITCHYARD_COORDINATOR_ID`). @default `<hostname>-<pid>-<6 random hex>` */
  readonly coordinatorId: string;
  /** How often the lease is renewed (`SWITCHYARD_LEASE_RENEW_MS`). @default 2000 */
  readonly leaseRenewMs: number;
  /** Lease lifetime; must exceed `leaseRenewMs` (`SWITCHYARD_LEASE_TTL_MS`). @default 10000 */
  readonly leaseTtlMs: number;
  /**
   * On SIGINT/SIGTERM, how long running jobs may finish before the coordinator stops; agents still
   * busy then are left running and reclaim their jobs after the restart (`SWITCHYARD_SHUTDOWN_DRAIN_MS`). @default 30000
   */
  readonly shutdownDrainMs: number;
  /** Most journal entries written in one group commit (`SWITCHYARD_COMMIT_MAX_BATCH`). @default 512 */
  readonly commitMaxBatch: number;
  /** Group commit across runs (`SWITCHYARD_COMMIT_BATCHING=on|off`); off commits each event alone. @default true */
  readonly commitBatching: boolean;
  /**
   * Whether agents may compress their frames (`SWITCHYARD_AGENT_COMPRESSION`, on|off): permessage-deflate
   * as ws offers it through its public options. Off declines an agent's offer, and frames go as is: ws
   * inflates each message through the zlib thread pool, 0.67 ms of coordinator time per job of a 4-job run
   * (dispatch bench), for frames of a few hundred bytes. @default off
   */
  readonly agentCompression: boolean;
  /** Time an agent has to acknowledge a dispatch, at least 1000 (`SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS`). @default 10000 */
  readonly dispatchAckTimeoutMs: number;
  /** Interval at which agents heartbeat running jobs (`SWITCHYARD_JOB_HEARTBEAT_INTERVAL_MS`). @default 60000 */
  readonly jobHeartbeatIntervalMs: number;
  /** A running job is stale after `jobHeartbeatIntervalMs * staleMultiplier` without a heartbeat (`SWITCHYARD_STALE_MULTIPLIER`). @default 2 */
  readonly staleMultiplier: number;
  /** How long a disconnected agent may take to reclaim its jobs (`SWITCHYARD_RECOVERY_WINDOW_MS`). @default 120000 */
  readonly recoveryWindowMs: number;
  /**
   * An agent that sent no `heartbeat` for this long gets no new job until it does; after twice as long
   * its socket is closed (`SWITCHYARD_AGENT_SILENT_MS`; the stock agent heartbeats every 30 s). @default 90000
   */
  readonly agentSilentMs: number;
  /**
   * An agent that registers again without a job it held has this long to replay the status it kept
   * while disconnected before the job counts as lost (`SWITCHYARD_REPLAY_GRACE_MS`). @default 10000
   */
  readonly replayGraceMs: number;
  /**
   * Where blobs (user caches, provenance bundles) live (`SWITCHYARD_BLOB_STORE`): `files` under
   * `<dataDir>/blobs`, or `postgres`, which coordinators sharing a database share. @default files with the embedded database, else postgres
   */
  readonly blobStore: 'files' | 'postgres';
  /** Bytes of user cache entries one repository keeps; its least recently used go past it (`SWITCHYARD_CACHE_QUOTA_BYTES`). @default 10 GiB */
  readonly cacheQuotaBytes: number;
  /** Bytes of one user cache entry (`SWITCHYARD_CACHE_MAX_ENTRY_BYTES`). @default 2 GiB */
  readonly cacheMaxEntryBytes: number;
  /** Retention (docs/retention.md): ended runs are archived this long after their end; null: never (`SWITCHYARD_RETENTION_RUNS`). @default 30 days */
  readonly retentionRunsMs: number | null;
  /** Processed and dead deliveries are removed this long after they arrived; null: never (`SWITCHYARD_RETENTION_DELIVERIES`). @default 14 days */
  readonly retentionDeliveriesMs: number | null;
  /** How often a retention pass runs, on one coordinator at a time (`SWITCHYARD_RETENTION_INTERVAL`). @default 1 hour */
  readonly retentionIntervalMs: number;
  /** How long a job may stay queued; 0 means never expire (`SWITCHYARD_QUEUE_TIMEOUT_MS`). @default 3600000 */
  readonly queueTimeoutMs: number;
  /** Dispatch attempts per job before it fails (`SWITCHYARD_MAX_DISPATCH_ATTEMPTS`). @default 5 */
  readonly maxDispatchAttempts: number;
  /** How long one inline expression may run in the sandbox (`SWITCHYARD_INLINE_EVAL_TIMEOUT_MS`, EVAL-2). @default 100 */
  readonly inlineEvalTimeoutMs: number;
  /** Agent authentication (`SWITCHYARD_AGENT_AUTH`): `token`, or `none` for loopback-only setups. @default 'token' */
  readonly agentAuth: 'token' | 'none';
  /** pino log level (`LOG_LEVEL`). @default 'info' */
  readonly logLevel: LogLevel;
  /** Log lines (`LOG_FORMAT`): `json`, `pretty` (one readable line per record), or `auto` (pretty on a terminal). @default 'auto' */
  readonly logFormat: LogFormat;
  /** Scaler backends and caps (`SWITCHYARD_SCALER*`, see ScalerSettings). */
  readonly scaler: ScalerSettings;
}

/**
 * Reads and validates the environment once. Throws `ConfigError` naming the first bad variable.
 * Pure apart from the random coordinator id suffix; call it from the composition root only.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): CompiledConfig {
  const raw = parseEnv(env);
  const config = { ...compile(raw), scaler: compileScalerSettings(raw, env) };
  if (config.leaseTtlMs <= config.leaseRenewMs) {
    throw new ConfigError(
      'SWITCHYARD_LEASE_TTL_MS',
      `Invalid SWITCHYARD_LEASE_TTL_MS: must be greater than SWITCHYARD_LEASE_RENEW_MS (${config.leaseRenewMs}), got ${config.leaseTtlMs}`,
    );
  }
  return config;
}

/** Never echoed in error messages: URLs may carry passwords. */
const MAY_HOLD_SECRETS = new Set([
  'DATABASE_URL',
  'REDIS_URL',
  'GITHUB_WEBHOOK_SECRET',
  'SWITCHYARD_GITHUB_WEBHOOK_SECRET',
  'SWITCHYARD_ADMIN_TOKEN',
  'SWITCHYARD_URL',
  'SWITCHYARD_SECRET_KEY',
  'SWITCHYARD_SECRET_KEY_OLD',
]);

/** @see CompiledConfig.port */
export const DEFAULT_PORT = 8080;
/** @see CompiledConfig.host */
export const DEFAULT_HOST = '127.0.0.1';

function parseEnv(env: NodeJS.ProcessEnv): RawEnv {
  return parseEnvWith(envSchema, env);
}

/** Validates the variables of `schema` (a pick of envSchema); throws `ConfigError` naming the first bad one. */
export function parseEnvWith<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv): z.infer<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const key = String(issue?.path[0] ?? 'environment');
  const value = env[key];
  const shown = typeof value === 'string' && !MAY_HOLD_SECRETS.has(key) ? ` (got ${JSON.stringify(value)})` : '';
  throw new ConfigError(key, `Invalid ${key}: ${issue?.message ?? 'invalid value'}${shown}`);
}

const DAY_MS = 86_400_000;

function compile(raw: RawEnv): Omit<CompiledConfig, 'scaler'> {
  return {
    port: raw.PORT ?? DEFAULT_PORT,
    host: raw.HOST ?? DEFAULT_HOST,
    dataDir: resolve(raw.SWITCHYARD_DATA_DIR ?? './.switchyard'),
    databaseUrl: raw.DATABASE_URL,
    embeddedPgPort: raw.SWITCHYARD_EMBEDDED_PG_PORT,
    redisUrl: raw.REDIS_URL,
    githubWebhookSecrets: splitSecrets(raw.SWITCHYARD_GITHUB_WEBHOOK_SECRET ?? raw.GITHUB_WEBHOOK_SECRET),
    adminToken: raw.SWITCHYARD_ADMIN_TOKEN,
    secretKey: masterKey('SWITCHYARD_SECRET_KEY', raw.SWITCHYARD_SECRET_KEY),
    secretKeyOld: masterKey('SWITCHYARD_SECRET_KEY_OLD', raw.SWITCHYARD_SECRET_KEY_OLD),
    githubApiUrl: (raw.SWITCHYARD_GITHUB_API_URL ?? 'https://api.github.com').replace(/\/+$/, ''),
    publicUrl: raw.SWITCHYARD_PUBLIC_URL?.replace(/\/+$/, ''),
    // One coordinator owns an embedded data dir, so its id is stable and a restart reclaims its runs at once.
    coordinatorId: raw.SWITCHYARD_COORDINATOR_ID ?? (raw.DATABASE_URL === undefined ? 'embedded' : defaultCoordinatorId()),
    leaseRenewMs: raw.SWITCHYARD_LEASE_RENEW_MS ?? 2_000,
    leaseTtlMs: raw.SWITCHYARD_LEASE_TTL_MS ?? 10_000,
    shutdownDrainMs: raw.SWITCHYARD_SHUTDOWN_DRAIN_MS ?? 30_000,
    retentionRunsMs: raw.SWITCHYARD_RETENTION_RUNS === undefined ? 30 * DAY_MS : raw.SWITCHYARD_RETENTION_RUNS,
    retentionDeliveriesMs: raw.SWITCHYARD_RETENTION_DELIVERIES === undefined ? 14 * DAY_MS : raw.SWITCHYARD_RETENTION_DELIVERIES,
    retentionIntervalMs: Math.max(1_000, raw.SWITCHYARD_RETENTION_INTERVAL ?? 3_600_000),
    commitMaxBatch: raw.SWITCHYARD_COMMIT_MAX_BATCH ?? 512,
    commitBatching: (raw.SWITCHYARD_COMMIT_BATCHING ?? 'on') === 'on',
    agentCompression: raw.SWITCHYARD_AGENT_COMPRESSION === 'on',
    dispatchAckTimeoutMs: raw.SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS ?? 10_000,
    jobHeartbeatIntervalMs: raw.SWITCHYARD_JOB_HEARTBEAT_INTERVAL_MS ?? 60_000,
    staleMultiplier: raw.SWITCHYARD_STALE_MULTIPLIER ?? 2,
    recoveryWindowMs: raw.SWITCHYARD_RECOVERY_WINDOW_MS ?? 120_000,
    agentSilentMs: raw.SWITCHYARD_AGENT_SILENT_MS ?? 90_000,
    replayGraceMs: raw.SWITCHYARD_REPLAY_GRACE_MS ?? DEFAULT_REPLAY_MS,
    blobStore: raw.SWITCHYARD_BLOB_STORE ?? (raw.DATABASE_URL === undefined ? 'files' : 'postgres'),
    cacheQuotaBytes: raw.SWITCHYARD_CACHE_QUOTA_BYTES ?? 10 * 1024 ** 3,
    cacheMaxEntryBytes: raw.SWITCHYARD_CACHE_MAX_ENTRY_BYTES ?? 2 * 1024 ** 3,
    queueTimeoutMs: raw.SWITCHYARD_QUEUE_TIMEOUT_MS ?? 3_600_000,
    maxDispatchAttempts: raw.SWITCHYARD_MAX_DISPATCH_ATTEMPTS ?? 5,
    inlineEvalTimeoutMs: raw.SWITCHYARD_INLINE_EVAL_TIMEOUT_MS ?? 100,
    logLevel: raw.LOG_LEVEL ?? 'info',
    logFormat: raw.LOG_FORMAT ?? 'auto',
    agentAuth: raw.SWITCHYARD_AGENT_AUTH ?? 'token',
  };
}

/** A master key variable, or a `ConfigError` saying what is wrong with it (never its value). */
function masterKey(name: string, value: string | undefined): Buffer | undefined {
  if (value === undefined) return undefined;
  try {
    return parseMasterKey(value);
  } catch (thrown) {
    throw new ConfigError(name, `Invalid ${name}: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  }
}

function splitSecrets(value: string | undefined): string[] {
  if (value === undefined) return [];
  return value
    .split(',')
    .map((secret) => secret.trim())
    .filter((secret) => secret.length > 0);
}

function defaultCoordinatorId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/**
 * `LOG_FORMAT` alone, for a logger made before (or without) the whole configuration; throws
 * `ConfigError` for an unknown value, as `loadConfig` does.
 */
export function loadLogFormat(env: NodeJS.ProcessEnv = process.env): LogFormat {
  const value = env['LOG_FORMAT'];
  const parsed = envSchema.shape.LOG_FORMAT.safeParse(value);
  if (parsed.success) return parsed.data ?? 'auto';
  const reason = parsed.error.issues[0]?.message ?? 'invalid value';
  throw new ConfigError('LOG_FORMAT', `Invalid LOG_FORMAT: ${reason} (got ${JSON.stringify(value)})`);
}
