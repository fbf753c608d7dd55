import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import type { FakeAgent } from '../../support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../../support/lock-repo.ts';
import { eventually } from '../../support/runtime.ts';
import { githubHeaders, pushPayload } from '../../support/webhooks.ts';

const SECRET = 'build-cache-webhooks';
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const LOCKFILE_HASH = 'd'.repeat(64);
const BUILDER = ['kici', 'kici:role:builder', 'kici:os:linux', 'kici:arch:x64'];

/** A lock file whose workflow has TypeScript source (a contentHash) and a dependency lock hash. */
function lockWithSource(contentHash: string): string {
  // TypeScript steps (no `run`): a KiCI agent's job, which is what the caches are for.
  const job = { ...runJob('test', []), runsOn: [{ kind: 'exact', value: 'kici' }], steps: [{ name: 'test', hasOutputs: false }] };
  const workflow = { ...pushWorkflow('ci', [job]), contentHash, compileSchemaVersion: 5 };
  return JSON.stringify({ ...(JSON.parse(lockFileWith([workflow])) as object), lockfileHash: LOCKFILE_HASH });
}

type Dispatch = Awaited<ReturnType<FakeAgent['dispatch']>>;

describe('build jobs: source and dependency caches built once, then handed to every job', { skip: await skipReason('external') }, () => {
  const suite = coordinatorSuite('external', { env: { SWITCHYARD_SECRET_KEY: '37'.repeat(32), GITHUB_WEBHOOK_SECRET: SECRET } });

  async function push(repo: Awaited<ReturnType<typeof createLockRepo>>, files: Record<string, string>, repository = 'acme/app') {
    const commit = repo.commit(files);
    const body = JSON.stringify(pushPayload(commit, repository));
    const res = await fetch(`${suite.client.url}/webhooks/github`, { method: 'POST', body, headers: await githubHeaders(SECRET, body, randomUUID(), 'push') });
    assert.equal(res.status, 202);
  }

  async function upload(agent: FakeAgent, jobId: string, request: object, bytes: Buffer) {
    const messageId = randomUUID();
    agent.send({ type: 'cache.upload.request', messageId, jobId, platform: 'linux', arch: 'x64', ...request });
    const { uploadUrl } = await agent.next('cache.upload.response', (m) => m.requestId === messageId);
    if (uploadUrl === '') return '';
    assert.equal((await fetch(uploadUrl, { method: 'PUT', body: bytes })).status, 200);
    agent.send({ type: 'cache.upload.complete', messageId: randomUUID(), jobId, platform: 'linux', arch: 'x64', ...request, ...((request as { cacheType: string }).cacheType === 'deps' ? { depsHash: sha(bytes) } : {}) });
    return uploadUrl;
  }

  const bytesAt = async (url: string | undefined) => Buffer.from(await (await fetch(url ?? 'http://127.0.0.1:1/')).arrayBuffer());
  const jobKeyOf = (dispatch: Dispatch) => (dispatch.jobConfig as { name?: string; workflowName?: string; buildOnly?: boolean }).buildOnly ? '__build__' : 'test';

  it('the first run builds and uploads; its job and the next run get the tarballs, and the next run has no build job', async () => {
    const repo = await createLockRepo();
    await suite.client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) }, 201);
    const agent = await suite.connect({ labels: BUILDER, maxConcurrency: 2, properties: {} });
    const contentHash = 'c'.repeat(64);
    await push(repo, { '.kici/kici.lock.json': lockWithSource(contentHash) });

    const build = await agent.dispatch(0);
    const config = build.jobConfig as Record<string, unknown>;
    assert.deepEqual([config['buildOnly'], config['buildSourceNeeded'], config['buildDepsNeeded'], config['contentHash'], config['lockfileHash']], [true, true, true, contentHash, LOCKFILE_HASH]);
    assert.deepEqual([config['targetPlatform'], config['targetArch']], ['linux', 'x64']);
    agent.ack(build);
    agent.status(build, 'running');
    const deps = randomBytes(30_000);
    const source = randomBytes(8_000);
    assert.equal(await upload(agent, build.jobId, { cacheType: 'source', contentHash: 'e'.repeat(64) }, source), '', 'a contentHash its lock file does not name is refused');
    assert.notEqual(await upload(agent, build.jobId, { cacheType: 'deps', lockfileHash: LOCKFILE_HASH }, deps), '');
    assert.notEqual(await upload(agent, build.jobId, { cacheType: 'source', contentHash }, source), '');
    agent.status(build, 'success');

    const job = await agent.dispatch(1);
    assert.equal(jobKeyOf(job), 'test');
    assert.deepEqual([job.sourceTarHash, job.depsHash], [sha(source), sha(deps)]);
    assert.ok((await bytesAt(job.sourceTarUrl)).equals(source) && (await bytesAt(job.depsUrl)).equals(deps), 'the URLs serve the uploaded tarballs');
    assert.equal(await upload(agent, job.jobId, { cacheType: 'deps', lockfileHash: LOCKFILE_HASH }, deps), '', 'only a build job uploads');
    agent.runAtOnce(job);

    await push(repo, { 'README.md': 'second commit, same workflow source' });
    const next = await agent.dispatch(2);
    assert.equal(jobKeyOf(next), 'test', 'no build job: the source is cached');
    assert.deepEqual([next.sourceTarHash, next.depsHash], [sha(source), sha(deps)]);
    agent.runAtOnce(next);
  });

  it('two runs needing the same missing source build it once: the second build waits, then only confirms it', async () => {
    const repo = await createLockRepo();
    await suite.client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/twice', provider: 'local', path: repo.path }) }, 201);
    const agent = await suite.connect({ labels: BUILDER, maxConcurrency: 4, properties: {} });
    const contentHash = 'f'.repeat(64);
    await push(repo, { '.kici/kici.lock.json': lockWithSource(contentHash) }, 'acme/twice');
    await push(repo, { 'README.md': 'another commit' }, 'acme/twice');
    const first = await agent.dispatch(0);
    assert.equal(jobKeyOf(first), '__build__');
    const runs = await eventually(async () => {
      const listed = await suite.client.json<{ runs: { run_id: string }[] }>('/api/v1/runs?repository=acme/twice');
      return listed.runs.length === 2 ? listed : undefined;
    }, 10_000, 'both runs');
    const waiting = await eventually(async () => {
      for (const { run_id: runId } of runs.runs) {
        if (runId === first.runId) continue;
        const build = await suite.client.job(runId, '__build__ci');
        if (build.status === 'pending' && build.waiting_reason) return build.waiting_reason;
      }
      return undefined;
    }, 10_000, 'the second build waits');
    assert.deepEqual(waiting, { kind: 'concurrency', message: `waiting for another run's build of the same workflow source (contentHash ${contentHash.slice(0, 12)}…); it will be used, not built again` });
    agent.ack(first);
    agent.status(first, 'running');
    await upload(agent, first.jobId, { cacheType: 'source', contentHash }, randomBytes(100));
    await upload(agent, first.jobId, { cacheType: 'deps', lockfileHash: LOCKFILE_HASH }, randomBytes(100));
    agent.status(first, 'success');

    const dispatched = await eventually(() => {
      const frames = agent.received.filter((m): m is Dispatch => m.type === 'job.dispatch');
      return frames.length >= 3 ? frames : undefined;
    }, 15_000, 'the first run job and the second build');
    const second = dispatched.find((frame) => frame.runId !== first.runId && jobKeyOf(frame) === '__build__');
    assert.ok(second, 'the second run still runs its build job');
    const secondConfig = second.jobConfig as Record<string, unknown>;
    assert.deepEqual([secondConfig['buildSourceNeeded'], secondConfig['buildDepsNeeded']], [false, false], 'it finds both tarballs and packs nothing');
    for (const frame of dispatched.filter((f) => jobKeyOf(f) === 'test')) assert.ok(frame.sourceTarUrl);
  });
});
