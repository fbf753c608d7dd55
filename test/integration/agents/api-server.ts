import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { AgentTokenRecord } from '../../../src/db/agent-tokens.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { registerAgentTokenRoutes } from '../../../src/http/api-agent-tokens.ts';
import { registerLogRoutes } from '../../../src/http/api-logs.ts';
import { RunHistory } from '../../../src/retention/run-history.ts';
import { Router } from '../../../src/http/router.ts';
import { createHttpServer, listen } from '../../../src/http/server.ts';
import { testLog } from '../../support/database.ts';

export interface ApiServer {
  url: string;
  adminToken: string;
  /** Records passed to `onRevoked`, in order. */
  revoked: AgentTokenRecord[];
  /** The server's clock; set it to move time. */
  clock: { now: number };
  /** fetch against the server with the admin bearer token. */
  call(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

/** A real node:http server with the admin check, the log routes and the agent-token routes. */
export async function startApiServer(db: Kysely<Schema>, now = 1_700_000_000_000): Promise<ApiServer> {
  const adminToken = `sya_${randomBytes(32).toString('hex')}`;
  const revoked: AgentTokenRecord[] = [];
  const clock = { now };
  const router = new Router();
  registerLogRoutes(router, { db, history: new RunHistory(db, null) });
  registerAgentTokenRoutes(router, { db, now: () => clock.now, onRevoked: (record) => revoked.push(record) });
  const adminTokenHash = createHash('sha256').update(adminToken).digest();
  const server = createHttpServer({ router, adminTokenHash, log: testLog });
  const port = await listen(server, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    adminToken,
    revoked,
    clock,
    call: (path, init = {}) =>
      fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${adminToken}`, ...(init.headers as Record<string, string>) } }),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

export async function insertRun(db: Kysely<Schema>, runId: string): Promise<void> {
  await db
    .insertInto('runs')
    .values({
      run_id: runId,
      workflow_name: 'wf',
      repository: null,
      status: 'running',
      created_at: 1,
      updated_at: 1,
      finished_at: null,
      failure_reason: null,
      init_failure: null,
      input_summary: null,
    })
    .execute();
}
