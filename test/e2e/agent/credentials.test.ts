import assert from 'node:assert/strict';
import { basename, dirname } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { cleanup, createRepo, dispatchFor, startAgent, step } from './fixtures.ts';
import { startGitHttpServer } from './git-http-server.ts';
import { ScriptedOrchestrator } from './scripted-orchestrator.ts';

describe('reference agent: clone credentials', () => {
  let orchestrator: ScriptedOrchestrator;

  afterEach(async () => {
    await cleanup();
    await orchestrator.close();
  });

  it('clones over HTTP with sourceAuth through GIT_ASKPASS, never putting the secret in a URL or a message', async () => {
    const repo = await createRepo({ 'README.md': 'private\n' });
    const repoDir = new URL(repo.url).pathname;
    const secret = 'ghs_secretvalue1234';
    const git = await startGitHttpServer(dirname(repoDir), { user: 'x-access-token', secret });
    try {
      orchestrator = await ScriptedOrchestrator.start();
      await startAgent(orchestrator.url);
      const peer = await orchestrator.connection(0);
      await peer.handshake();
      const dispatch = dispatchFor({ ...repo, url: git.url(basename(repoDir)) }, [step('read', 'cat README.md; git remote get-url origin')], {
        sourceAuth: { kind: 'basic', secret },
        token: secret,
      });
      peer.send(dispatch);
      const status = await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running', 30_000);
      assert.equal(status.state, 'success', JSON.stringify(peer.forJob(dispatch.jobId).filter((m) => m.type === 'log.chunk')));
      assert.ok(git.authorizations.includes(`x-access-token:${secret}`), 'the server saw the credentials');
      const lines = peer.forJob(dispatch.jobId).flatMap((m) => (m.type === 'log.chunk' && m.stepIndex === 0 ? m.lines : []));
      assert.deepEqual(lines, ['private', git.url(basename(repoDir))], 'the remote URL carries no credentials');
      assert.ok(!JSON.stringify(peer.received).includes(secret));
    } finally {
      await git.close();
    }
  });

  it('fails the checkout without credentials instead of prompting', async () => {
    const repo = await createRepo({ 'README.md': 'private\n' });
    const repoDir = new URL(repo.url).pathname;
    const git = await startGitHttpServer(dirname(repoDir), { user: 'u', secret: 'right-secret' });
    try {
      orchestrator = await ScriptedOrchestrator.start();
      await startAgent(orchestrator.url);
      const peer = await orchestrator.connection(0);
      await peer.handshake();
      const dispatch = dispatchFor({ ...repo, url: git.url(basename(repoDir)) }, [step('never', 'true')]);
      peer.send(dispatch);
      const status = await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running', 30_000);
      assert.equal(status.state, 'failed');
      assert.match(status.data?.error ?? '', /checkout failed: git clone of main failed/);
    } finally {
      await git.close();
    }
  });
});
