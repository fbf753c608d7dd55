import pg from 'pg';
import type { CoordinatorProcess } from '../../support/processes.ts';

/** Every row of every table of the database, as text, table by table. */
export async function dumpAllTables(databaseUrl: string): Promise<Map<string, string>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
    );
    const dump = new Map<string, string>();
    for (const { table_name: table } of tables) {
      const { rows } = await client.query<{ row: string }>(`SELECT t::text AS row FROM ${client.escapeIdentifier(table)} t`);
      dump.set(table, rows.map((r) => r.row).join('\n'));
    }
    return dump;
  } finally {
    await client.end();
  }
}

export async function query<T extends pg.QueryResultRow>(databaseUrl: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** A call of the admin API: status and parsed body. */
export async function call(coordinator: CoordinatorProcess, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await coordinator.api(path, { method, ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** One job with a `run` step, requiring `label`, optionally in `environment`, needing `needs`. */
export function secretJob(name: string, label: string, options: { environment?: string; needs?: string[] } = {}): object {
  return {
    _type: 'static',
    name,
    runsOn: [{ kind: 'exact', value: label }],
    needs: options.needs ?? [],
    steps: [{ name: 'use-secret', hasOutputs: false, run: 'echo "$API_KEY"' }],
    ...(options.environment !== undefined && { environments: [{ value: options.environment, dynamic: false }] }),
  };
}
