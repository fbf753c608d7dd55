import assert from 'node:assert/strict';
import { after, afterEach, before } from 'node:test';
import type { DatabaseKind } from '../../src/db/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, type FakeAgentOptions } from './fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess, type CoordinatorProcess } from './processes.ts';

/** What a suite's tests reach its coordinator with; set once the suite's `before` has run. */
export interface CoordinatorSuite {
  readonly coordinator: CoordinatorProcess;
  /** The admin API client. */
  readonly client: CoordinatorClient;
  /** An agent token made for the suite. */
  readonly token: string;
  /** A scripted agent, closed after the test. */
  connect: (options: FakeAgentOptions, token?: string) => Promise<FakeAgent>;
  /** Runs `stop` after the test, before the check that the coordinator still answers. */
  afterTest: (stop: () => Promise<void>) => void;
}

/**
 * One coordinator process for the suite, on the shared database of `kind` with `env` added, an admin
 * client and an agent token. After each test the agents it made are stopped and the coordinator must
 * still answer /healthz; after the suite it is stopped and the database dropped (external: at once,
 * not at the file's exit). Call it inside `describe`: it registers the suite's hooks.
 */
export function coordinatorSuite(kind: DatabaseKind, options: { env?: Record<string, string>; afterAll?: () => Promise<void> } = {}): CoordinatorSuite {
  let started: { databaseUrl: string; coordinator: CoordinatorProcess; client: CoordinatorClient; token: string } | null = null;
  const cleanups: (() => Promise<void>)[] = [];
  const get = () => {
    if (!started) throw new Error('the coordinator suite is used before its `before` ran');
    return started;
  };
  before(async () => {
    const databaseUrl = await sharedDatabaseUrl(kind);
    const coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, ...options.env });
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    started = { databaseUrl, coordinator, client, token: (await client.createToken()).token };
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
    assert.ok(await get().client.healthy(), 'the coordinator still answers /healthz');
  });
  after(async () => {
    if (started) {
      await stopProcess(started.coordinator);
      if (kind === 'external') await dropDatabase(started.databaseUrl);
    }
    for (const cleanup of processCleanups.splice(0)) await cleanup();
    await options.afterAll?.();
  });
  const suite: CoordinatorSuite = {
    get coordinator() {
      return get().coordinator;
    },
    get client() {
      return get().client;
    },
    get token() {
      return get().token;
    },
    connect: async (agentOptions, token = get().token) => {
      const agent = await FakeAgent.connect(get().client.wsUrl, token, agentOptions);
      cleanups.push(() => agent.close());
      return agent;
    },
    afterTest: (stop) => void cleanups.push(stop),
  };
  return suite;
}
