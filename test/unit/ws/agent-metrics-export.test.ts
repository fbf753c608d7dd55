import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import { exportedName } from '../../../src/ws/agent-metrics-export.ts';
import { parseAgentMessage } from '../../../src/ws/messages.ts';
import { createAgentMetrics } from '../../../src/ws/metrics.ts';
import { wireRecords } from '../../support/kici-wire-fixture.ts';

/** Every agent.metrics frame of the stock agent's recorded session, parsed as the coordinator parses it. */
function recordedReports() {
  return wireRecords().flatMap((record) => {
    if (record.msg.type !== 'agent.metrics') return [];
    const parsed = parseAgentMessage(JSON.stringify(record.msg));
    assert.ok(parsed.ok && parsed.message.type === 'agent.metrics', 'every recorded agent.metrics frame parses');
    return [parsed.message];
  });
}

function sampleLine(text: string, prefix: string): string | undefined {
  return text.split('\n').find((line) => line.startsWith(prefix));
}

describe("agents' own metrics re-exported as switchyard_agent_*", () => {
  it('names: the kici_agent_ prefix is replaced, dots become underscores', () => {
    assert.equal(exportedName('kici_agent_jobs_total'), 'switchyard_agent_jobs_total');
    assert.equal(exportedName('nodejs.eventloop.delay.p99'), 'switchyard_agent_nodejs_eventloop_delay_p99');
    assert.equal(exportedName('weird name{}"'), 'switchyard_agent_weird_name___');
  });

  it("the stock agent's recorded reports become gauges labelled by agent, with histogram sums and counts; a disconnect removes them", async () => {
    const registry = new Registry();
    const agents = new AgentRegistry();
    const metrics = createAgentMetrics(registry, agents);
    const reports = recordedReports();
    assert.ok(reports.length > 0);
    for (const report of reports) metrics.reported.record(report.agentId, report.metrics);
    const text = await registry.metrics();
    const last = reports[reports.length - 1];
    const jobs = last?.metrics.find((m) => m.name === 'kici_agent_jobs_total');
    assert.equal(sampleLine(text, `switchyard_agent_jobs_total{agent="${last?.agentId}",status="success"}`), `switchyard_agent_jobs_total{agent="${last?.agentId}",status="success"} ${jobs?.value}`);
    assert.match(text, new RegExp(`switchyard_agent_clone_duration_seconds_count\\{agent="${last?.agentId}"\\} \\d+`));
    assert.match(text, new RegExp(`switchyard_agent_nodejs_eventloop_time\\{agent="${last?.agentId}",nodejs_eventloop_state="idle"\\} [0-9.]+`));
    metrics.reported.forget(last?.agentId ?? '');
    assert.doesNotMatch(await registry.metrics(), /switchyard_agent_jobs_total\{/);
  });

  it('a report cannot take over the registry: label name clashes, own families and unbounded families are refused', async () => {
    const registry = new Registry();
    const metrics = createAgentMetrics(registry, new AgentRegistry());
    metrics.reported.record('a1', [
      { name: 'kici_agent_jobs_total', type: 'counter', value: 3, labels: { agent: 'spoofed' } },
      ...Array.from({ length: 400 }, (_, i) => ({ name: `m${i}`, type: 'gauge', value: i })),
    ]);
    metrics.reported.record('a2', [{ name: 'slots', type: 'gauge', value: 99 }]);
    const text = await registry.metrics();
    assert.match(text, /switchyard_agent_jobs_total\{reported_agent="spoofed",agent="a1"\} 3|switchyard_agent_jobs_total\{agent="a1",reported_agent="spoofed"\} 3/);
    assert.doesNotMatch(text, /switchyard_agent_slots\{agent=/, 'an agent cannot write into the coordinator\'s own switchyard_agent_slots');
    const families = new Set(text.split('\n').filter((line) => line.startsWith('# TYPE switchyard_agent_')).map((line) => line.split(' ')[2]));
    assert.ok(families.size <= 202, `families are capped (${families.size})`);
  });
});
