import assert from 'node:assert/strict';
import { createHash, createPublicKey, randomBytes, randomUUID, verify, type JsonWebKeyInput } from 'node:crypto';
import { describe, it } from 'node:test';
import type { OrchestratorMessageOf, OrchestratorMessageType } from '../../../src/ws/messages.ts';
import { skipReason } from '../../support/database.ts';
import { storageSessionRecords } from '../../support/kici-storage-fixture.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { runStepsWorkflow, type FakeAgent } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN } from '../../support/processes.ts';
import { eventually } from '../../support/runtime.ts';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const MAX_ENTRY = 64 * 1024;
const ENV = { SWITCHYARD_SECRET_KEY: '42'.repeat(32), SWITCHYARD_CACHE_MAX_ENTRY_BYTES: String(MAX_ENTRY) };

type Answer = 'cache.user.restore.response' | 'cache.user.save.response' | 'provenance.upload.response' | 'agent.api.response';

/** Sends a request as the stock agent does and waits for the answer that names it. */
async function ask<T extends Answer & OrchestratorMessageType>(agent: FakeAgent, answer: T, request: { type: string; [field: string]: unknown }): Promise<OrchestratorMessageOf<T>> {
  const messageId = randomUUID();
  agent.send({ ...request, messageId, requestId: messageId });
  return agent.next(answer, (m) => (m as { requestId: string }).requestId === messageId);
}

const put = (url: string, body: Buffer) => fetch(url, { method: 'PUT', body, headers: { 'content-length': String(body.length) } }).catch((thrown: unknown) => ({ status: 0, thrown }));

for (const blobStore of ['files', 'postgres'] as const) {
  describe(`agent storage requests over a real coordinator (blob store ${blobStore})`, { skip: await skipReason('external') }, () => {
    const suite = coordinatorSuite('external', { env: { ...ENV, SWITCHYARD_BLOB_STORE: blobStore } });

    /** An agent holding a running attempt of a fresh run on `ref`. */
    async function holding(ref = 'main') {
      const label = `st-${randomUUID().slice(0, 8)}`;
      const agent = await suite.connect({ labels: [label] });
      const runId = await suite.client.createRun(runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['step', 'true']] }]), { ref });
      const dispatch = await agent.dispatch(0);
      agent.ack(dispatch);
      agent.status(dispatch, 'running');
      return { agent, runId, jobId: dispatch.jobId, dispatch };
    }

    async function saveEntry(agent: FakeAgent, jobId: string, key: string, bytes: Buffer) {
      const offered = await ask(agent, 'cache.user.save.response', { type: 'cache.user.save.request', jobId, key });
      assert.equal(offered.skip, false);
      assert.ok(offered.uploadUrl);
      assert.equal((await put(offered.uploadUrl, bytes)).status, 200);
      agent.send({ type: 'cache.user.save.complete', messageId: randomUUID(), jobId, key, tarHash: sha(bytes), sizeBytes: bytes.length });
      return offered.uploadUrl;
    }

    it('a saved entry is restored by its key and by a prefix, byte for byte with its hash; its key is then skipped', async () => {
      const { agent, jobId } = await holding();
      const key = `deps-${randomUUID()}`;
      const miss = await ask(agent, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId, key });
      assert.deepEqual([miss.hit, miss.downloadUrl], [false, undefined]);
      const bytes = randomBytes(40_000);
      await saveEntry(agent, jobId, key, bytes);
      const hit = await eventually(async () => {
        const answer = await ask(agent, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId, key });
        return answer.hit ? answer : undefined;
      }, 10_000, 'the completed entry is restored');
      assert.equal(hit.matchedKey, key);
      assert.equal(hit.tarHash, sha(bytes));
      const download = await fetch(hit.downloadUrl ?? '');
      assert.equal(download.status, 200);
      assert.ok(Buffer.from(await download.arrayBuffer()).equals(bytes));

      const later = await holding();
      const byPrefix = await ask(later.agent, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId: later.jobId, key: 'deps-none', restoreKeys: ['deps-'] });
      assert.ok(byPrefix.hit, 'a later run restores it by prefix');
      const again = await ask(later.agent, 'cache.user.save.response', { type: 'cache.user.save.request', jobId: later.jobId, key });
      assert.deepEqual([again.skip, again.uploadUrl], [true, undefined]);
    });

    it('bad uploads: past the entry cap 413 and nothing kept; a hash that does not match is dropped; a URL takes one body', async () => {
      const { agent, jobId } = await holding();
      const big = `big-${randomUUID()}`;
      const bigOffer = await ask(agent, 'cache.user.save.response', { type: 'cache.user.save.request', jobId, key: big });
      const tooBig = randomBytes(MAX_ENTRY + 1);
      const refused = await put(bigOffer.uploadUrl ?? '', tooBig);
      assert.ok(refused.status === 413 || refused.status === 0, `413 (or the socket cut while the body still came): ${refused.status}`);
      agent.send({ type: 'cache.user.save.complete', messageId: randomUUID(), jobId, key: big, tarHash: sha(tooBig), sizeBytes: tooBig.length });

      const lying = `lying-${randomUUID()}`;
      const lyingOffer = await ask(agent, 'cache.user.save.response', { type: 'cache.user.save.request', jobId, key: lying });
      const bytes = randomBytes(1000);
      assert.equal((await put(lyingOffer.uploadUrl ?? '', bytes)).status, 200);
      assert.equal((await put(lyingOffer.uploadUrl ?? '', bytes)).status, 409, 'a second body for the same URL');
      agent.send({ type: 'cache.user.save.complete', messageId: randomUUID(), jobId, key: lying, tarHash: sha(Buffer.from('something else')), sizeBytes: bytes.length });

      // The completions have no answer: a request sent after them is answered after them.
      for (const key of [big, lying]) {
        assert.equal((await ask(agent, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId, key })).hit, false, key);
        assert.equal((await ask(agent, 'cache.user.save.response', { type: 'cache.user.save.request', jobId, key })).skip, false, `${key} may be saved again`);
      }
    });

    it('a tampered, borrowed or misused signed URL gets 403 and no bytes', async () => {
      const { agent, jobId } = await holding();
      const key = `signed-${randomUUID()}`;
      const secret = randomBytes(5000);
      await saveEntry(agent, jobId, key, secret);
      const hit = await eventually(async () => {
        const answer = await ask(agent, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId, key });
        return answer.hit ? answer : undefined;
      }, 10_000, 'the entry is restored');
      const url = new URL(hit.downloadUrl ?? '');
      const signature = url.searchParams.get('signature') ?? '';
      const tampered = new URL(url);
      tampered.searchParams.set('signature', `${signature[0] === '0' ? '1' : '0'}${signature.slice(1)}`);
      const longer = new URL(url);
      longer.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 86_400_000));
      const borrowed = new URL(url);
      borrowed.pathname = `${url.pathname}x`;
      const unsigned = new URL(url.pathname, url.origin);
      for (const [what, target] of [['tampered', tampered], ['expiry moved', longer], ['another object', borrowed], ['unsigned', unsigned]] as const) {
        const res = await fetch(target);
        const body = await res.text();
        assert.equal(res.status, 403, what);
        assert.ok(!body.includes(secret.toString('latin1').slice(0, 16)), `${what}: no bytes`);
        assert.match(body, /forbidden/);
      }
      const offered = await ask(agent, 'cache.user.save.response', { type: 'cache.user.save.request', jobId, key: `other-${randomUUID()}` });
      const asPut = new URL(offered.uploadUrl ?? '');
      const other = new URL(asPut);
      other.pathname = `${asPut.pathname.slice(0, -1)}${asPut.pathname.endsWith('0') ? '1' : '0'}`;
      assert.equal((await put(other.toString(), Buffer.from('x'))).status, 403, 'an upload URL for another upload');
      assert.equal((await put(hit.downloadUrl ?? '', Buffer.from('x'))).status, 405, 'a download URL does not take a body');
    });

    it('a request about a job the asking agent does not hold, or no job at all, is refused as a miss', async () => {
      const owner = await holding();
      const key = `owned-${randomUUID()}`;
      await saveEntry(owner.agent, owner.jobId, key, Buffer.from('mine'));
      await eventually(async () => (await ask(owner.agent, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId: owner.jobId, key })).hit || undefined, 10_000, 'saved');
      const stranger = await suite.connect({ labels: ['stranger'] });
      for (const jobId of [owner.jobId, randomUUID()]) {
        assert.equal((await ask(stranger, 'cache.user.restore.response', { type: 'cache.user.restore.request', jobId, key })).hit, false);
        assert.deepEqual((await ask(stranger, 'cache.user.save.response', { type: 'cache.user.save.request', jobId, key: 'x' })).skip, true);
        assert.equal((await ask(stranger, 'provenance.upload.response', { type: 'provenance.upload.request', jobId, subjectDigest: sha(Buffer.from('x')) })).uploadUrl, '');
      }
      assert.ok(stranger.isOpen, 'refused, not disconnected');
    });

    it('provenance: the bundle is uploaded, recorded with the run on completion, listed and downloadable', async () => {
      const { agent, jobId, runId } = await holding();
      const digest = sha(Buffer.from('artifact'));
      const offered = await ask(agent, 'provenance.upload.response', { type: 'provenance.upload.request', jobId, subjectDigest: digest });
      const bundle = Buffer.from(JSON.stringify({ mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json', subject: digest }));
      assert.equal((await put(offered.uploadUrl, bundle)).status, 200);
      agent.send({ type: 'provenance.upload.complete', messageId: randomUUID(), jobId, subjectName: 'app.tgz', subjectDigest: sha(Buffer.from('another')), mediaType: 'application/json' });
      agent.send({ type: 'provenance.upload.complete', messageId: randomUUID(), jobId, subjectName: 'app.tgz', subjectDigest: digest, mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json' });
      type Listed = { attestations: { id: number; jobKey: string; subjectName: string; subjectDigest: string; mediaType: string; sizeBytes: number; sha256: string; createdAt: number }[] };
      const listed = await eventually(async () => {
        const { attestations } = await suite.client.json<Listed>(`/api/v1/runs/${runId}/attestations`);
        return attestations.length > 0 ? attestations : undefined;
      }, 10_000, 'the attestation is listed');
      assert.equal(listed.length, 1, 'a completion naming another digest records nothing');
      assert.deepEqual({ ...listed[0], id: 0 }, { id: 0, jobKey: 'build', subjectName: 'app.tgz', subjectDigest: digest, mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json', sizeBytes: bundle.length, sha256: sha(bundle), createdAt: listed[0]?.createdAt });
      const res = await fetch(`${suite.client.url}/api/v1/runs/${runId}/attestations/${listed[0]?.id}/bundle`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      assert.equal(res.status, 200);
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(bundle));
      assert.equal((await fetch(`${suite.client.url}/api/v1/runs/${runId}/attestations`)).status, 401, 'administrators only');
      const { attestations } = await suite.client.json<Listed>(`/api/v1/runs/${runId}`);
      assert.deepEqual(attestations, listed, 'listed with the run (the CLI and the runs page read them there)');
    });

    it("the stock agent's recorded requests, sent for a job this agent holds, get the answers it reads", async () => {
      const { agent, jobId } = await holding();
      const answers = { 'cache.user.restore.request': 'cache.user.restore.response', 'cache.user.save.request': 'cache.user.save.response', 'provenance.upload.request': 'provenance.upload.response', 'agent.api.request': 'agent.api.response' } as const;
      const recorded = storageSessionRecords().filter((r) => r.dir === 'A->O' && Object.hasOwn(answers, r.msg.type));
      assert.equal(recorded.length, 4);
      for (const { msg } of recorded) {
        const frame = { ...msg, jobId, ...(msg['params'] ? { params: { ...(msg['params']), jobId } } : {}) };
        const answer = await ask(agent, answers[msg.type as keyof typeof answers], frame);
        assert.equal((answer as { error?: string }).error, undefined, `${msg.type}: ${JSON.stringify(answer)}`);
        if (msg.type === 'cache.user.save.request') assert.ok((answer as { uploadUrl?: string }).uploadUrl, 'a new key gets an upload URL');
        if (msg.type === 'provenance.upload.request') assert.ok((answer as { uploadUrl: string }).uploadUrl);
      }
    });

    it('agent.api.request is answered unsupported method <name>, but for oidc.token.request', async () => {
      const agent = await suite.connect({ labels: ['api'] });
      const answer = await ask(agent, 'agent.api.response', { type: 'agent.api.request', method: 'host.requestReboot', params: {} });
      assert.equal(answer.error, 'unsupported method host.requestReboot');
    });

    it('oidc.token.request mints an ES256 ID token for a job the agent holds, with claims from the run, verifiable with the published key', async () => {
      const { agent, jobId, runId } = await holding('release');
      const answer = await ask(agent, 'agent.api.response', { type: 'agent.api.request', method: 'oidc.token.request', params: { jobId, audience: 'kici-provenance' } });
      const result = answer.result as { token: string; expiresIn: number; jti: string };
      assert.equal(answer.error, undefined);
      const [header, payload, signature] = result.token.split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
      assert.deepEqual([claims['aud'], claims['repository'], claims['ref'], claims['kici_run_id'], claims['kici_job_id'], claims['iss']], ['kici-provenance', 'acme/app', 'release', runId, jobId, suite.client.url]);
      assert.equal(result.expiresIn, 300);
      const { keys } = (await (await fetch(`${suite.client.url}/.well-known/jwks.json`)).json()) as { keys: JsonWebKeyInput['key'][] };
      const key = createPublicKey({ key: keys[0] as JsonWebKeyInput['key'], format: 'jwk' });
      assert.ok(verify('sha256', Buffer.from(`${header}.${payload}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url')), 'signed with the published key');
      const stranger = await suite.connect({ labels: ['api-stranger'] });
      const refused = await ask(stranger, 'agent.api.response', { type: 'agent.api.request', method: 'oidc.token.request', params: { jobId, audience: 'x' } });
      assert.match(refused.error ?? '', /is not an attempt this agent holds/);
      assert.equal(refused.result, undefined);
    });
  });
}
