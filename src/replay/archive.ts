import type { Kysely } from 'kysely';
import { machineGraphs } from '../../visualize/graph.ts';
import type { MachineGraph } from '../../visualize/graph.ts';
import type { JournalRecord } from '../db/journal.ts';
import { RunHistory } from '../retention/run-history.ts';
import { getRunWithJobs } from '../db/run-queries.ts';
import type { Schema } from '../db/schema.ts';
import { replayRecordedRun } from './engine.ts';
import { ReplayRunNotFoundError } from './errors.ts';
import { loadRecordedRun } from './load.ts';
import type { ReplayReport } from './types.ts';

/** What the replay and visualize commands read about a run, from the database or a coordinator. */
export interface RunArchive {
  replay(runId: string, options: { to?: number; force?: boolean }): Promise<ReplayReport>;
  history(runId: string): Promise<JournalRecord[]>;
  /** The run and job projections (`GET /api/v1/runs/:id`). */
  run(runId: string): Promise<unknown>;
  machines(): Promise<MachineGraph[]>;
}

/** A coordinator refused or could not answer; `status` is the HTTP status, 0 when unreachable. */
export class ArchiveRequestError extends Error {
  override readonly name = 'ArchiveRequestError';
  constructor(
    readonly status: number,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The run's history from `history` (archived runs included), its projections from the database. */
export function databaseArchive(db: Kysely<Schema>, history: RunHistory = new RunHistory(db, null)): RunArchive {
  return {
    replay: async (runId, options) => replayRecordedRun(await loadRecordedRun(history, runId), options),
    history: async (runId) => {
      const events = await history.journal(runId);
      if (events.length === 0) throw new ReplayRunNotFoundError(runId);
      return events;
    },
    run: async (runId) => {
      const found = await getRunWithJobs(db, runId);
      if (!found) throw new ReplayRunNotFoundError(runId);
      return found;
    },
    machines: () => Promise.resolve(machineGraphs()),
  };
}

const REQUEST_TIMEOUT_MS = 60_000;

async function request(base: URL, adminToken: string, path: string): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(new URL(path, base), { headers: { authorization: `Bearer ${adminToken}` }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  } catch (thrown) {
    const cause = thrown instanceof Error && thrown.cause instanceof Error ? thrown.cause.message : String(thrown);
    throw new ArchiveRequestError(0, `cannot reach the coordinator at ${base.origin} (${cause}); is \`switchyard start\` running there?`);
  }
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch (thrown) {
    throw new ArchiveRequestError(response.status, `the coordinator answered GET ${path} with a body that is not JSON`, { cause: thrown });
  }
  if (!response.ok) {
    const { error, reason } = (body ?? {}) as { error?: string; reason?: string };
    throw new ArchiveRequestError(response.status, `the coordinator answered ${response.status} to GET ${path}: ${[error, reason].filter(Boolean).join(': ')}`);
  }
  return body;
}

/** The same reads through a running coordinator's API (its embedded database stays its own). */
export function coordinatorArchive(url: URL, adminToken: string): RunArchive {
  const get = (path: string) => request(url, adminToken, path);
  const runPath = (runId: string) => `/api/v1/runs/${encodeURIComponent(runId)}`;
  return {
    replay: async (runId, options) => {
      const query = new URLSearchParams();
      if (options.to !== undefined) query.set('to', String(options.to));
      if (options.force) query.set('force', 'true');
      const suffix = query.size > 0 ? `?${query.toString()}` : '';
      return (await get(`${runPath(runId)}/replay${suffix}`)) as ReplayReport;
    },
    history: async (runId) => ((await get(`${runPath(runId)}/history`)) as { events: JournalRecord[] }).events,
    run: (runId) => get(runPath(runId)),
    machines: async () => ((await get('/api/v1/machines')) as { machines: MachineGraph[] }).machines,
  };
}
