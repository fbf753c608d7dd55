import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig, loadLogFormat } from '../../../src/config/index.ts';
import type { LogFormat } from '../../../src/config/index.ts';
import { createLogger } from '../../../src/log.ts';
import { prettyLine } from '../../../src/log-pretty.ts';

/** A logger writing into an array, as the coordinator's is made (base `coordinatorId`). */
function capture(format: LogFormat = 'json', terminal = false) {
  const lines: string[] = [];
  const log = createLogger('debug', { coordinatorId: 'coord-a' }, { format, terminal, destination: { write: (line: string) => lines.push(line) } });
  return { log, lines };
}

/** The top-level keys of one JSON line, in order and with repeats (JSON.parse would hide them). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < line.length; i++) {
    const char = line[i];
    if (char === '"') {
      let end = i + 1;
      while (line[end] !== '"') end += line[end] === '\\' ? 2 : 1;
      if (depth === 1 && line[end + 1] === ':') keys.push(JSON.parse(line.slice(i, end + 1)) as string);
      i = end;
    } else if (char === '{' || char === '[') depth++;
    else if (char === '}' || char === ']') depth--;
  }
  return keys;
}

function assertNoRepeatedKey(line: string): Record<string, unknown> {
  const keys = topLevelKeys(line);
  assert.deepEqual(keys.filter((key, index) => keys.indexOf(key) !== index), [], line);
  return JSON.parse(line) as Record<string, unknown>;
}

describe('log records never hold a key twice', () => {
  it('a scaler record: component and scaler bound by child loggers, scaler repeated by the call', () => {
    const { log, lines } = capture();
    const scaler = log.child({ component: 'scaler' }).child({ scaler: 'bare-metal' });
    scaler.info({ agentId: 'a-1', pid: 42, scaler: 'bare-metal', agent: 'reference' }, 'bare-metal agent started');
    const record = assertNoRepeatedKey(lines[0] ?? '');
    assert.equal(record['scaler'], 'bare-metal');
    assert.equal(record['pid'], 42, 'a field the call sets alone is kept');
  });

  it('the coordinator id of the base logger repeated by a call (lease claimed, coordinator listening)', () => {
    const { log, lines } = capture();
    log.child({ component: 'ownership' }).info({ coordinatorId: 'coord-a', epoch: 3 }, 'lease claimed');
    log.info({ port: 8080, coordinatorId: 'coord-a' }, 'coordinator listening');
    for (const line of lines) assert.equal(assertNoRepeatedKey(line)['coordinatorId'], 'coord-a');
  });

  it('keeps a differing value under call.<key>: another coordinator named in a record of this one', () => {
    const { log, lines } = capture();
    log.child({ component: 'scaler' }).warn({ coordinatorId: 'coord-dead', agents: 2 }, 'released the scaler agents of a coordinator whose lease expired');
    const record = assertNoRepeatedKey(lines[0] ?? '');
    assert.equal(record['coordinatorId'], 'coord-a');
    assert.equal(record['call.coordinatorId'], 'coord-dead');
  });

  it('a run-scoped child logging its run id again, with an error first or a message only', () => {
    const { log, lines } = capture();
    const run = log.child({ runId: 'r-1' });
    run.error({ err: new Error('boom'), runId: 'r-1' }, 'run restore refused');
    run.warn(new Error('plain'), 'an error as the first argument');
    run.info('no fields at all');
    assert.equal(lines.length, 3);
    for (const line of lines) assert.equal(assertNoRepeatedKey(line)['runId'], 'r-1');
  });
});

describe('tokens are never logged', () => {
  it('masks token query values and sya_ tokens in logged strings', () => {
    const { log, lines } = capture();
    log.info({ method: 'GET', path: '/ws/observe?runId=r-1&token=sya_0123abcd', status: 401 }, 'request refused');
    log.warn({ url: 'ws://h/ws/agent?access_token=kat_x&x=1', note: 'header was Bearer sya_ffff' }, 'agent refused');
    const [refused, agent] = lines.map((line) => JSON.parse(line) as Record<string, string>);
    assert.equal(refused?.['path'], '/ws/observe?runId=r-1&token=***');
    assert.equal(agent?.['url'], 'ws://h/ws/agent?access_token=***&x=1');
    assert.equal(agent?.['note'], 'header was Bearer ***');
    assert.ok(!lines.join('').includes('sya_0123abcd') && !lines.join('').includes('sya_ffff'));
  });
});

describe('LOG_FORMAT', () => {
  it('is read through the configuration, auto by default, and an unknown value is refused by name', () => {
    assert.equal(loadConfig({}).logFormat, 'auto');
    assert.equal(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
    assert.equal(loadLogFormat({}), 'auto');
    assert.equal(loadLogFormat({ LOG_FORMAT: 'json' }), 'json');
    for (const load of [() => loadConfig({ LOG_FORMAT: 'xml' }), () => loadLogFormat({ LOG_FORMAT: 'xml' })]) {
      assert.throws(load, (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.key, 'LOG_FORMAT');
        assert.equal(error.message, 'Invalid LOG_FORMAT: must be one of auto, json, pretty (got "xml")');
        return true;
      });
    }
  });

  it('auto is pretty on a terminal and JSON elsewhere; json and pretty are forced', () => {
    const shape = (format: LogFormat, terminal: boolean) => {
      const { log, lines } = capture(format, terminal);
      log.info('hello');
      return (lines[0] ?? '').startsWith('{') ? 'json' : 'pretty';
    };
    assert.deepEqual([shape('auto', true), shape('auto', false), shape('json', true), shape('pretty', false)], ['pretty', 'json', 'json', 'pretty']);
  });

  it('pretty: one line with time, level, component, message, then the other fields as key=value', () => {
    const { log, lines } = capture('pretty');
    log.child({ component: 'http' }).info({ method: 'GET', path: '/api/v1/runs?token=sya_x', status: 401, reason: 'bad token', ids: ['a'] }, 'request refused');
    assert.match(
      lines[0] ?? '',
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO {2}\[http\] request refused coordinatorId=coord-a method=GET path="\/api\/v1\/runs\?token=\*\*\*" status=401 reason="bad token" ids=\["a"\]\n$/,
    );
  });

  it('pretty: an error is its type and message, with the stack (escaped, on the same line) from ERROR up', () => {
    const { log, lines } = capture('pretty');
    log.warn({ err: new TypeError('soft') }, 'retrying');
    log.error({ err: new Error('hard') }, 'failed');
    assert.match(lines[0] ?? '', / WARN {2}retrying coordinatorId=coord-a err="TypeError: soft"\n$/);
    assert.match(lines[1] ?? '', / ERROR failed coordinatorId=coord-a err="Error: hard" err\.stack="Error: hard\\n {4}at /);
    assert.equal(lines.join('').split('\n').length, 3, 'one line per record');
  });

  it('pretty passes through a line that is not a JSON record', () => {
    assert.equal(prettyLine('not json'), 'not json\n');
  });
});
