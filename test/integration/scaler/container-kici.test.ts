import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import { compileScalerDefinitions } from '../../../src/config/scaler-definitions.ts';
import type { ContainerDefinition } from '../../../src/config/scaler-definitions.ts';
import { ContainerBackend } from '../../../src/scaler/container.ts';
import { tempDir } from '../../support/database.ts';

/** A create request as the engine received it. */
interface Created {
  name: string | null;
  body: { Image: string; Cmd?: string[]; Env: string[]; Labels: Record<string, string>; WorkingDir?: string; HostConfig: { NetworkMode: string } };
}

/**
 * The few Docker Engine API calls a spawn and a destroy make, answered on a unix socket: no
 * container engine runs on this machine, so this records what the backend asks an engine for.
 */
class RecordingEngine {
  readonly created: Created[] = [];
  private readonly waiting = new Map<string, ServerResponse>();
  private readonly server: Server = createServer((req, res) => void this.handle(req, res));

  async listen(socketPath: string): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(socketPath, resolve));
  }

  async close(): Promise<void> {
    for (const res of this.waiting.values()) res.end(JSON.stringify({ StatusCode: 137 }));
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://engine');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const route = `${req.method ?? 'GET'} ${url.pathname.replace(/^\/v[\d.]+/, '')}`;
    const id = /^\/containers\/([^/]+)/.exec(url.pathname.replace(/^\/v[\d.]+/, ''))?.[1] ?? '';
    res.setHeader('content-type', 'application/json');
    if (route === 'POST /containers/create') {
      this.created.push({ name: url.searchParams.get('name'), body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Created['body'] });
      res.statusCode = 201;
      res.end(JSON.stringify({ Id: `id-${this.created.length}`, Warnings: [] }));
    } else if (route.endsWith('/wait')) {
      this.waiting.set(id, res);
    } else if (route === 'GET /containers/json') {
      res.end(JSON.stringify(this.created.map((c, i) => ({ Id: `id-${i + 1}`, Labels: c.body.Labels }))));
    } else if (req.method === 'DELETE') {
      this.waiting.get(id)?.end(JSON.stringify({ StatusCode: 0 }));
      this.waiting.delete(id);
      res.statusCode = 204;
      res.end();
    } else {
      res.statusCode = 204;
      res.end();
    }
  }
}

function backendOf(definition: ContainerDefinition, socketPath: string): ContainerBackend {
  const { type: _type, host, ...rest } = definition;
  return new ContainerBackend({ ...rest, socketPath, installationId: 'sy-kici-test', remoteHost: host, now: () => Date.now(), log: pino({ level: 'silent' }) });
}

function envOf(created: Created | undefined): Record<string, string> {
  return Object.fromEntries((created?.body.Env ?? []).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
}

describe('container backend with a KiCI agent image (recorded Docker API calls)', () => {
  const engine = new RecordingEngine();
  after(() => engine.close());

  it("runs the image's own command with the stock environment contract and the ownership labels", async () => {
    const socketPath = join(await tempDir('sy-engine-'), 'docker.sock');
    await engine.listen(socketPath);
    const image = { type: 'container', name: 'kici-image', image: 'kici-agent:0.1.24', labels: ['linux'], agent: { kind: 'kici', env: { KICI_LOG_LEVEL: 'debug' } } };
    const [definition] = compileScalerDefinitions([image], 'build-host');
    assert.ok(definition?.type === 'container');
    const backend = backendOf(definition, socketPath);
    const labelSet = backend.labelSets[0];
    assert.ok(labelSet);
    const token = `kat_${'c'.repeat(64)}`;
    await backend.spawn(labelSet, 'scaler-container-0000abcd', 'ws://10.0.0.5:8080/ws/agent', { cpu: 0, memoryBytes: 0 }, { boundJobId: 'build', runId: 'r1' }, { token });
    const [created] = engine.created;
    assert.equal(created?.name, 'scaler-container-0000abcd');
    assert.equal(created?.body.Image, 'kici-agent:0.1.24');
    assert.equal(created?.body.Cmd, undefined, "the image's own entrypoint and command");
    const env = envOf(created);
    assert.equal(env['PATH'], undefined, "the image's own PATH is kept");
    assert.deepEqual(
      Object.keys(env).filter((name) => name.startsWith('KICI_')).sort(),
      ['KICI_AGENT_ID', 'KICI_AGENT_TOKEN', 'KICI_LABELS', 'KICI_LOG_LEVEL', 'KICI_ORCHESTRATOR_URL', 'KICI_PORT'],
    );
    assert.equal(env['KICI_ORCHESTRATOR_URL'], 'ws://10.0.0.5:8080/ws/agent');
    assert.equal(env['KICI_AGENT_TOKEN'], token);
    assert.equal(env['KICI_LABELS'], 'linux');
    assert.notEqual(env['KICI_PORT'], '8080', 'on the host network each agent has its own health port');
    assert.equal(env['SWITCHYARD_AGENT_TOKEN'], undefined);
    assert.equal(env['SWITCHYARD_OWNER'], 'sy-kici-test');
    assert.equal(created?.body.Labels['switchyard.bound-job-id'], 'build');
    await backend.destroy('scaler-container-0000abcd');
  });

  it('a configured command replaces the image command; a bridge network needs no port of its own', async () => {
    const socketPath = join(await tempDir('sy-engine-'), 'docker.sock');
    const second = new RecordingEngine();
    await second.listen(socketPath);
    try {
      const [definition] = compileScalerDefinitions([{ type: 'container', name: 'kici-bridge', image: 'kici-agent:0.1.24', network: 'agents', agent: { kind: 'kici', command: ['node', '/app/server.js'] } }], 'h');
      assert.ok(definition?.type === 'container');
      const backend = backendOf(definition, socketPath);
      const labelSet = backend.labelSets[0];
      assert.ok(labelSet);
      await backend.spawn(labelSet, 'scaler-container-0000beef', 'ws://10.0.0.5:8080/ws', { cpu: 0, memoryBytes: 0 }, null, { token: 'kat_x' });
      const [created] = second.created;
      assert.deepEqual(created?.body.Cmd, ['node', '/app/server.js'], 'nothing appended');
      assert.equal(envOf(created)['KICI_PORT'], undefined);
      assert.equal(envOf(created)['KICI_LABELS'], undefined, 'no configured labels: no KICI_LABELS');
      assert.equal(created?.body.HostConfig.NetworkMode, 'agents');
      await backend.destroy('scaler-container-0000beef');
    } finally {
      await second.close();
    }
  });
});
