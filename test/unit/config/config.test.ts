import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isAbsolute, join } from 'node:path';
import { ConfigError, loadConfig } from '../../../src/config/index.ts';

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected loadConfig to throw');
}

describe('retention settings (docs/retention.md)', () => {
  it('default to runs archived after 30 days, deliveries removed after 14, a pass every hour', () => {
    const config = loadConfig({});
    assert.deepEqual([config.retentionRunsMs, config.retentionDeliveriesMs, config.retentionIntervalMs], [30 * 86_400_000, 14 * 86_400_000, 3_600_000]);
  });

  it('take durations with a unit, and off for keep forever', () => {
    const config = loadConfig({ SWITCHYARD_RETENTION_RUNS: '90d', SWITCHYARD_RETENTION_DELIVERIES: 'off', SWITCHYARD_RETENTION_INTERVAL: '15m' });
    assert.deepEqual([config.retentionRunsMs, config.retentionDeliveriesMs, config.retentionIntervalMs], [90 * 86_400_000, null, 900_000]);
  });

  it('refuse a bare number or a word, naming the variable', () => {
    assert.match(configError({ SWITCHYARD_RETENTION_RUNS: '30' }).message, /SWITCHYARD_RETENTION_RUNS: must be a duration such as 30d, 12h, 90m or 45s, or off/);
    assert.match(configError({ SWITCHYARD_RETENTION_INTERVAL: 'off' }).message, /SWITCHYARD_RETENTION_INTERVAL: must be a duration such as 30d, 12h, 90m or 45s/);
  });
});

describe('loadConfig', () => {
  it('applies every default on an empty environment', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.dataDir, join(process.cwd(), '.switchyard'));
    assert.equal(config.databaseUrl, undefined);
    assert.equal(config.redisUrl, undefined);
    assert.deepEqual(config.githubWebhookSecrets, []);
    assert.equal(config.adminToken, undefined);
    assert.equal(config.leaseRenewMs, 2000);
    assert.equal(config.leaseTtlMs, 10000);
    assert.equal(config.shutdownDrainMs, 30000);
    assert.equal(config.commitMaxBatch, 512);
    assert.equal(config.commitBatching, true);
    assert.equal(config.dispatchAckTimeoutMs, 10000);
    assert.equal(config.jobHeartbeatIntervalMs, 60000);
    assert.equal(config.staleMultiplier, 2);
    assert.equal(config.recoveryWindowMs, 120000);
    assert.equal(config.agentSilentMs, 90000);
    assert.equal(config.replayGraceMs, 10000);
    assert.equal(config.queueTimeoutMs, 3600000);
    assert.equal(config.maxDispatchAttempts, 5);
    assert.equal(config.inlineEvalTimeoutMs, 100);
    assert.equal(config.logLevel, 'info');
  });

  it('generates a coordinator id from host, pid and random hex for a shared database, different each time', () => {
    const env = { DATABASE_URL: 'postgres://127.0.0.1/switchyard' };
    const a = loadConfig(env).coordinatorId;
    const b = loadConfig(env).coordinatorId;
    assert.match(a, new RegExp(`-${process.pid}-[0-9a-f]{6}$`));
    assert.notEqual(a, b);
  });

  it('uses the stable id "embedded" with the embedded database, so a restart reclaims its runs', () => {
    assert.equal(loadConfig({}).coordinatorId, 'embedded');
  });

  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '9090',
      HOST: '0.0.0.0',
      SWITCHYARD_DATA_DIR: '/var/lib/switchyard',
      DATABASE_URL: 'postgres://u@db:5432/sy',
      REDIS_URL: 'redis://cache:6379',
      SWITCHYARD_ADMIN_TOKEN: 'tok',
      SWITCHYARD_SECRET_KEY: '11'.repeat(32),
      SWITCHYARD_SECRET_KEY_OLD: Buffer.alloc(32, 2).toString('base64'),
      SWITCHYARD_COORDINATOR_ID: 'coord-a',
      SWITCHYARD_LEASE_RENEW_MS: '500',
      SWITCHYARD_LEASE_TTL_MS: '1500',
      SWITCHYARD_SHUTDOWN_DRAIN_MS: '5000',
      SWITCHYARD_RETENTION_RUNS: '7d',
      SWITCHYARD_RETENTION_DELIVERIES: '12h',
      SWITCHYARD_RETENTION_INTERVAL: '30m',
      SWITCHYARD_COMMIT_MAX_BATCH: '64',
      SWITCHYARD_COMMIT_BATCHING: 'off',
      SWITCHYARD_AGENT_COMPRESSION: 'off',
      SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS: '1000',
      SWITCHYARD_JOB_HEARTBEAT_INTERVAL_MS: '5000',
      SWITCHYARD_STALE_MULTIPLIER: '2.5',
      SWITCHYARD_RECOVERY_WINDOW_MS: '3000',
      SWITCHYARD_AGENT_SILENT_MS: '5000',
      SWITCHYARD_REPLAY_GRACE_MS: '2000',
      SWITCHYARD_BLOB_STORE: 'files',
      SWITCHYARD_CACHE_QUOTA_BYTES: '1000000',
      SWITCHYARD_CACHE_MAX_ENTRY_BYTES: '50000',
      SWITCHYARD_QUEUE_TIMEOUT_MS: '0',
      SWITCHYARD_MAX_DISPATCH_ATTEMPTS: '3',
      SWITCHYARD_INLINE_EVAL_TIMEOUT_MS: '250',
      LOG_LEVEL: 'debug',
      LOG_FORMAT: 'json',
      SWITCHYARD_EMBEDDED_PG_PORT: '5433',
      SWITCHYARD_GITHUB_API_URL: 'https://github.example.com/api/v3/',
      SWITCHYARD_PUBLIC_URL: 'https://ci.example.com/',
    });
    const { scaler, ...rest } = config;
    assert.deepEqual(scaler.backends, [], 'no scalers by default with DATABASE_URL');
    assert.equal(scaler.maxAgents, 10);
    assert.deepEqual(rest, {
      port: 9090,
      host: '0.0.0.0',
      dataDir: '/var/lib/switchyard',
      databaseUrl: 'postgres://u@db:5432/sy',
      embeddedPgPort: 5433,
      redisUrl: 'redis://cache:6379',
      githubWebhookSecrets: [],
      githubApiUrl: 'https://github.example.com/api/v3',
      publicUrl: 'https://ci.example.com',
      adminToken: 'tok',
      secretKey: Buffer.alloc(32, 0x11),
      secretKeyOld: Buffer.alloc(32, 2),
      coordinatorId: 'coord-a',
      leaseRenewMs: 500,
      leaseTtlMs: 1500,
      shutdownDrainMs: 5000,
      retentionRunsMs: 7 * 86_400_000,
      retentionDeliveriesMs: 12 * 3_600_000,
      retentionIntervalMs: 1_800_000,
      commitMaxBatch: 64,
      commitBatching: false,
      agentCompression: false,
      dispatchAckTimeoutMs: 1000,
      jobHeartbeatIntervalMs: 5000,
      staleMultiplier: 2.5,
      recoveryWindowMs: 3000,
      agentSilentMs: 5000,
      replayGraceMs: 2000,
      blobStore: 'files',
      cacheQuotaBytes: 1000000,
      cacheMaxEntryBytes: 50000,
      queueTimeoutMs: 0,
      maxDispatchAttempts: 3,
      inlineEvalTimeoutMs: 250,
      logLevel: 'debug',
      logFormat: 'json',
      agentAuth: 'token',
    });
  });

  it('resolves a relative data dir to an absolute path', () => {
    const config = loadConfig({ SWITCHYARD_DATA_DIR: 'some/dir' });
    assert.ok(isAbsolute(config.dataDir));
    assert.equal(config.dataDir, join(process.cwd(), 'some/dir'));
  });

  it('splits webhook secrets on commas, trimming and dropping blanks', () => {
    assert.deepEqual(loadConfig({ GITHUB_WEBHOOK_SECRET: 'new, old ,,' }).githubWebhookSecrets, ['new', 'old']);
  });

  it('prefers SWITCHYARD_GITHUB_WEBHOOK_SECRET over GITHUB_WEBHOOK_SECRET', () => {
    const config = loadConfig({ GITHUB_WEBHOOK_SECRET: 'plain', SWITCHYARD_GITHUB_WEBHOOK_SECRET: 'prefixed' });
    assert.deepEqual(config.githubWebhookSecrets, ['prefixed']);
  });

  it('treats empty variables as unset', () => {
    const config = loadConfig({ PORT: '', DATABASE_URL: '  ', LOG_LEVEL: '' });
    assert.equal(config.port, 8080);
    assert.equal(config.databaseUrl, undefined);
    assert.equal(config.logLevel, 'info');
  });

  it('does not read process.env when given an explicit environment', () => {
    const saved = process.env.PORT;
    process.env.PORT = '1234';
    try {
      assert.equal(loadConfig({}).port, 8080);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });

  const invalid: [string, string][] = [
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['PORT', '80.5'],
    ['DATABASE_URL', 'mysql://db/x'],
    ['REDIS_URL', 'http://cache'],
    ['SWITCHYARD_COORDINATOR_ID', 'has spaces'],
    ['SWITCHYARD_LEASE_RENEW_MS', '-1'],
    ['SWITCHYARD_COMMIT_MAX_BATCH', '0'],
    ['SWITCHYARD_COMMIT_BATCHING', 'yes'],
    ['SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS', '999'],
    ['SWITCHYARD_STALE_MULTIPLIER', '0.5'],
    ['SWITCHYARD_QUEUE_TIMEOUT_MS', '1h'],
    ['SWITCHYARD_MAX_DISPATCH_ATTEMPTS', '0'],
    ['SWITCHYARD_INLINE_EVAL_TIMEOUT_MS', '0'],
    ['LOG_LEVEL', 'verbose'],
  ];
  for (const [key, value] of invalid) {
    it(`rejects ${key}=${value} with a ConfigError naming the variable`, () => {
      const error = configError({ [key]: value });
      assert.equal(error.name, 'ConfigError');
      assert.equal(error.key, key);
      assert.match(error.message, new RegExp(`^Invalid ${key}: `));
      const secretBearing = key.endsWith('_URL');
      assert.equal(error.message.includes(value), !secretBearing, error.message);
    });
  }

  it('never echoes a database URL, which may carry a password', () => {
    const error = configError({ DATABASE_URL: 'mysql://admin:hunter2@db/x' });
    assert.equal(error.key, 'DATABASE_URL');
    assert.ok(!error.message.includes('hunter2'), error.message);
  });

  it('requires the lease TTL to exceed the renew interval', () => {
    const error = configError({ SWITCHYARD_LEASE_RENEW_MS: '5000', SWITCHYARD_LEASE_TTL_MS: '5000' });
    assert.equal(error.key, 'SWITCHYARD_LEASE_TTL_MS');
    assert.match(error.message, /greater than SWITCHYARD_LEASE_RENEW_MS \(5000\)/);
    assert.equal(configError({ SWITCHYARD_LEASE_RENEW_MS: '20000' }).key, 'SWITCHYARD_LEASE_TTL_MS');
  });
});
