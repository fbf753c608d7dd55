import { autoLabels } from '../../lib/self-reported-labels.ts';
import { randomBytes } from 'node:crypto';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

/** Raw agent options as the CLI collects them; everything but `url` has a default. */
export const agentOptionsSchema = z.object({
  /**
   * Coordinator socket URL, `ws://` or `wss://`, used verbatim; several, comma-separated, are
   * coordinators of one database, tried in turn whenever a connection fails.
   */
  url: z
    .string()
    .transform((list) => list.split(',').map((url) => url.trim()).filter((url) => url !== ''))
    .refine((urls) => urls.length > 0 && urls.every((url) => /^wss?:\/\//.test(url)), 'must be a ws:// or wss:// URL (several: comma-separated)'),
  /** `kat_…` token; without one the agent registers directly (auth mode `none`). */
  token: z.string().min(1).optional(),
  /** Configured labels; the `kici:` prefix is reserved. @default [] */
  labels: z.array(z.string().min(1)).default([]),
  /** @default 1 */
  maxConcurrency: z.number().int().positive().default(1),
  /** Parent of every job's workspace. @default `<tmpdir>/switchyard-agent` */
  workDir: z.string().min(1).optional(),
  /** @default `<hostname>-<6 hex>` */
  agentId: z.string().min(1).optional(),
  /** `heartbeat` period while registered. @default 30000 */
  heartbeatMs: z.number().int().positive().default(30_000),
  /** `job.heartbeat` period while a job runs. @default 60000 */
  jobHeartbeatMs: z.number().int().positive().default(60_000),
  /** `agent.metrics` period. @default 30000 */
  metricsMs: z.number().int().positive().default(30_000),
  /** First reconnect delay before jitter. @default 1000 */
  reconnectBaseMs: z.number().int().positive().default(1000),
  /** @default 60000 */
  reconnectCapMs: z.number().int().positive().default(60_000),
  /** Ring of buffered messages kept while disconnected. @default 5000 */
  bufferCapacity: z.number().int().positive().default(5000),
  /** @default 50 */
  logBatchLines: z.number().int().positive().default(50),
  /** @default 100 */
  logBatchMs: z.number().int().positive().default(100),
});

export type AgentOptions = z.input<typeof agentOptionsSchema>;

export interface CompiledAgentOptions extends Omit<z.output<typeof agentOptionsSchema>, 'workDir' | 'agentId'> {
  workDir: string;
  agentId: string;
  /** Configured labels plus the self-reported `kici:os:*`, `kici:arch:*` and `kici:host:*`. */
  sentLabels: string[];
}

export class AgentOptionsError extends Error {
  override readonly name = 'AgentOptionsError';
}

export function compileAgentOptions(raw: AgentOptions): CompiledAgentOptions {
  const parsed = agentOptionsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AgentOptionsError(`${issue?.path.join('.') ?? 'options'}: ${issue?.message ?? 'invalid'}`);
  }
  const reserved = parsed.data.labels.filter((label) => label.startsWith('kici:'));
  if (reserved.length > 0) throw new AgentOptionsError(`labels: the kici: prefix is reserved (${reserved.join(', ')})`);
  const host = hostname();
  return {
    ...parsed.data,
    workDir: parsed.data.workDir ?? join(tmpdir(), 'switchyard-agent'),
    agentId: parsed.data.agentId ?? `${host}-${randomBytes(3).toString('hex')}`,
    sentLabels: [...new Set([...parsed.data.labels, ...autoLabels(host)])],
  };
}

