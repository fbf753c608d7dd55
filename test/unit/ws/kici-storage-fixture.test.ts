import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseAgentMessage, parseOrchestratorMessage } from '../../../src/ws/messages.ts';
import { STORAGE_SESSION_FIXTURE, storageSessionRecords } from '../../support/kici-storage-fixture.ts';

/**
 * The stock agent 0.1.24 against Switchyard, recorded by a proxy on the socket (tokens, URL
 * signatures and ID tokens redacted): a build job, a TypeScript job using ctx.cache,
 * ctx.attestProvenance and ctx.emit, and the run the event started.
 */
const records = storageSessionRecords();
const sent = (dir: 'A->O' | 'O->A', type: string) => records.filter((r) => r.dir === dir && r.msg.type === type).map((r) => r.msg);

describe('the recorded stock agent session with storage and events, through our parser', () => {
  it('is the session it says it is', () => {
    assert.ok(readFileSync(STORAGE_SESSION_FIXTURE, 'utf8').length > 10_000);
    const requests = ['cache.upload.request', 'cache.upload.complete', 'cache.user.restore.request', 'cache.user.save.request', 'provenance.upload.request', 'provenance.upload.complete', 'event.emit', 'agent.api.request'];
    for (const type of requests) assert.ok(sent('A->O', type).length > 0, `the agent sent ${type}`);
  });

  it('every frame of either side parses, none ignored', () => {
    for (const record of records) {
      const result = record.dir === 'A->O' ? parseAgentMessage(JSON.stringify(record.msg)) : parseOrchestratorMessage(JSON.stringify(record.msg));
      assert.ok(result.ok, `${record.dir} ${record.msg.type}: ${result.ok ? '' : result.reason}`);
    }
  });

  it('every request was answered once, with the answer the stock agent reads', () => {
    const answers: Record<string, string> = {
      'cache.upload.request': 'cache.upload.response',
      'cache.user.restore.request': 'cache.user.restore.response',
      'cache.user.save.request': 'cache.user.save.response',
      'provenance.upload.request': 'provenance.upload.response',
      'event.emit': 'event.emit.response',
      'agent.api.request': 'agent.api.response',
    };
    for (const [request, answer] of Object.entries(answers)) {
      for (const asked of sent('A->O', request)) {
        const id = asked['requestId'] ?? asked['messageId'];
        const answered = sent('O->A', answer).filter((m) => m['requestId'] === id);
        assert.equal(answered.length, 1, `${request} ${String(id)} answered once`);
        assert.equal(answered[0]?.['error'], undefined, `${request}: ${String(answered[0]?.['error'])}`);
      }
    }
    assert.equal(sent('A->O', 'agent.api.request')[0]?.['method'], 'oidc.token.request');
    assert.ok(sent('O->A', 'event.emit.response')[0]?.['deliveryId']);
    assert.ok(String(sent('O->A', 'provenance.upload.response')[0]?.['uploadUrl']).includes('/blobs/uploads/'));
  });

  it('the build job is dispatched as the stock agent expects, and the job after it gets the tarballs', () => {
    const dispatches = sent('O->A', 'job.dispatch');
    const build = dispatches.find((d) => (d['jobConfig'] as { buildOnly?: boolean }).buildOnly === true);
    assert.ok(build);
    const job = dispatches.find((d) => (d['jobConfig'] as { name?: string }).name === 'hello');
    assert.ok(job && typeof job['sourceTarUrl'] === 'string' && typeof job['depsUrl'] === 'string');
    const upload = sent('A->O', 'cache.upload.request')[0];
    assert.equal(upload?.['jobId'], build['jobId'], 'the build job uploads');
  });
});
