import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { RawEnv } from './env.ts';
import { ConfigError } from './errors.ts';
import { compileScalerDefinitions, defaultScalerDefinitions, passedHostEnv } from './scaler-definitions.ts';
import type { ScalerDefinition } from './scaler-definitions.ts';

/** Scaler configuration (docs/architecture.md#the-scaler), compiled once with the rest of `CompiledConfig`. */
export interface ScalerSettings {
  /**
   * Backends: a JSON array in `SWITCHYARD_SCALERS` or the file `SWITCHYARD_SCALERS_FILE`; `none` turns
   * scaling off. @default with the embedded database, one bare-metal backend; with `DATABASE_URL`, none
   */
  readonly backends: readonly ScalerDefinition[];
  /** Agents of every backend together (`SWITCHYARD_SCALER_MAX_AGENTS`). @default 10 */
  readonly maxAgents: number;
  /** CPUs reserved by every backend together (`SWITCHYARD_SCALER_MAX_CPU`). @default null (unlimited) */
  readonly maxCpu: number | null;
  /** Memory reserved by every backend together (`SWITCHYARD_SCALER_MAX_MEMORY_BYTES`). @default null (unlimited) */
  readonly maxMemoryBytes: number | null;
  /** A spawn that has not registered by then is destroyed and its reservation freed (`SWITCHYARD_SCALER_SPAWN_TIMEOUT_MS`). @default 300000 */
  readonly spawnTimeoutMs: number;
  /** Lifetime of a spawned agent's token; never shorter than the job timeout + 10 min (`SWITCHYARD_SCALER_TOKEN_TTL_MS`). @default 3600000 */
  readonly tokenTtlMs: number;
  /**
   * How often agent sessions are compared with the registry, for the disconnect grace
   * (`SWITCHYARD_SCALER_TICK_MS`); spawn and idle deadlines are the agents' own timers. @default 1000
   */
  readonly tickMs: number;
  /** The socket URL spawned agents connect to (`SWITCHYARD_SCALER_URL`). @default `ws://<host>:<port>/ws/agent` */
  readonly orchestratorUrl: string | undefined;
  /** Owner label of every scaler resource (`SWITCHYARD_INSTALLATION_ID`). @default generated once and kept in the database */
  readonly installationId: string | undefined;
  /** Host variables passed to bare-metal agents (PATH, HOME, locale, ...); nothing else of the coordinator's environment. */
  readonly agentEnv: Readonly<Record<string, string>>;
}

function definitionsSource(raw: RawEnv): { key: string; text: string } | null {
  if (raw.SWITCHYARD_SCALERS !== undefined) return { key: 'SWITCHYARD_SCALERS', text: raw.SWITCHYARD_SCALERS };
  if (raw.SWITCHYARD_SCALERS_FILE === undefined) return null;
  try {
    return { key: 'SWITCHYARD_SCALERS_FILE', text: readFileSync(raw.SWITCHYARD_SCALERS_FILE, 'utf8') };
  } catch (thrown) {
    throw new ConfigError('SWITCHYARD_SCALERS_FILE', `Invalid SWITCHYARD_SCALERS_FILE: cannot read ${raw.SWITCHYARD_SCALERS_FILE} (${(thrown as Error).message})`);
  }
}

function compileBackends(raw: RawEnv): ScalerDefinition[] {
  const source = definitionsSource(raw);
  if (source === null) {
    const extra = (raw.SWITCHYARD_SCALER_LABELS ?? '').split(',').map((l) => l.trim()).filter(Boolean);
    return raw.DATABASE_URL === undefined ? defaultScalerDefinitions(extra) : [];
  }
  if (source.text.trim() === 'none') return [];
  try {
    return compileScalerDefinitions(JSON.parse(source.text) as unknown);
  } catch (thrown) {
    const issue = thrown instanceof z.ZodError ? thrown.issues[0] : undefined;
    const detail = issue ? `${issue.path.join('.') || 'scalers'}: ${issue.message}` : (thrown as Error).message;
    throw new ConfigError(source.key, `Invalid ${source.key}: ${detail}`);
  }
}

export function compileScalerSettings(raw: RawEnv, env: NodeJS.ProcessEnv): ScalerSettings {
  return {
    backends: compileBackends(raw),
    maxAgents: raw.SWITCHYARD_SCALER_MAX_AGENTS ?? 10,
    maxCpu: raw.SWITCHYARD_SCALER_MAX_CPU ?? null,
    maxMemoryBytes: raw.SWITCHYARD_SCALER_MAX_MEMORY_BYTES ?? null,
    spawnTimeoutMs: raw.SWITCHYARD_SCALER_SPAWN_TIMEOUT_MS ?? 300_000,
    tokenTtlMs: raw.SWITCHYARD_SCALER_TOKEN_TTL_MS ?? 3_600_000,
    tickMs: raw.SWITCHYARD_SCALER_TICK_MS ?? 1_000,
    orchestratorUrl: raw.SWITCHYARD_SCALER_URL,
    installationId: raw.SWITCHYARD_INSTALLATION_ID,
    agentEnv: passedHostEnv(env),
  };
}
