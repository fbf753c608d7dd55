import assert from 'node:assert/strict';
import { after as afterAll, before, describe, it } from 'node:test';
import { skipReason } from '../support/database.ts';
import { dropDatabase } from '../support/fake-agent.ts';
import { awaitBurst, burstRepository, postPushes, startReferenceAgent } from '../support/burst.ts';
import type { ReferenceAgent } from '../support/burst.ts';
import { after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';

const SECRET = 'burst-webhook-secret';
const RUNS = 300;
const SLOTS = 8;
/** Gives up only when no run finished for this long; a loaded machine is slow, not stuck. */
const STALL_MS = 5 * 60_000;

/**
 * Regression (burst livelock): a burst against one busy agent must not rate-limit its settling frames
 * away, close it 4031 while it is alive, or punish its replays with 4003; every run succeeds.
 */
describe('a burst of 300 pushes on one reference agent with 8 slots (real processes)', { skip: await skipReason('external'), timeout: 60 * 60_000 }, () => {
  let coordinator: CoordinatorProcess;
  let agent: ReferenceAgent;
  let databaseUrl: string;
  let burst: Awaited<ReturnType<typeof burstRepository>>;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    burst = await burstRepository();
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_COORDINATOR_ID: 'coord-burst', LOG_LEVEL: 'warn' });
    const registered = await coordinator.api('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: burst.repo.path }) });
    assert.equal(registered.status, 201);
    const token = (await (await coordinator.api('/api/v1/agent-tokens', { method: 'POST', body: '{}' })).json()) as { token: string };
    agent = await startReferenceAgent({ wsUrl: `${coordinator.url.replace('http', 'ws')}/ws/agent`, token: token.token, agentId: 'burst-agent', maxConcurrency: SLOTS });
  });

  afterAll(async () => {
    await agent.stop();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    burst.repo.remove();
    for (const cleanup of after.splice(0)) await cleanup();
  });

  it('every run succeeds and the agent is never closed 4031 or 4003', { timeout: 60 * 60_000 }, async () => {
    await postPushes({ url: coordinator.url, secret: SECRET, sha: burst.sha, count: RUNS, width: 25, prefix: 'burst' });
    const outcome = await awaitBurst(databaseUrl, RUNS, STALL_MS, (line) => console.log(`[burst] ${line}`));
    const closes = agent.closeCodes();
    const coordinatorCloses = [...coordinator.output().matchAll(/"code":(40\d\d)/g)].map((m) => Number(m[1]));
    const context = () => `${JSON.stringify(outcome)}\nagent closes: ${closes.join(',')}\ncoordinator closes: ${coordinatorCloses.join(',')}`;
    const aliveMisses = coordinator.output().split('\n').filter((line) => line.includes('missed its ack deadline but is alive')).length;
    console.log(`[burst] ${outcome.terminal} runs in ${Math.round(outcome.elapsedMs / 1000)} s: ${JSON.stringify(outcome.statuses)}; rate.limit.warning to the agent: ${agent.rateLimitWarnings()}; ack deadlines missed while alive: ${aliveMisses}`);
    assert.equal(outcome.runs, RUNS, `every delivery became a run\n${context()}`);
    assert.deepEqual(outcome.statuses, { success: RUNS }, `every run succeeded\n${context()}`);
    assert.deepEqual(closes, [], `the agent was never disconnected\n${context()}`);
    assert.ok(!coordinatorCloses.includes(4031) && !coordinatorCloses.includes(4003), `no 4031/4003 close\n${context()}`);
    const violations = await coordinator.api('/metrics').then((res) => res.text());
    assert.match(violations, /switchyard_ws_ownership_violations_total\{cause="other_agent"\} 0/);
  });
});
