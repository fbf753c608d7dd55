import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

/** One metric of an `agent.metrics` frame, as the stock agent sends it (OpenTelemetry names and types). */
export interface ReportedMetric {
  name: string;
  type?: string;
  value?: number;
  count?: number;
  sum?: number;
  labels?: Record<string, string | number | boolean>;
}

/** Families re-exported at most: an agent cannot grow the coordinator's metrics without bound. */
const MAX_FAMILIES = 200;
/** Series kept per agent. */
const MAX_SERIES_PER_AGENT = 500;

/** `kici_agent_jobs_total` → `switchyard_agent_jobs_total`; `nodejs.eventloop.time` → `switchyard_agent_nodejs_eventloop_time`. */
export function exportedName(name: string): string {
  const bare = name.replace(/^kici_agent_/, '').replace(/[^a-zA-Z0-9_]/g, '_');
  return `switchyard_agent_${bare}`;
}

function labelName(key: string): string {
  const clean = key.replace(/[^a-zA-Z0-9_]/g, '_');
  if (clean === 'agent') return 'reported_agent';
  return /^[a-zA-Z_]/.test(clean) && !clean.startsWith('__') ? clean : `l_${clean}`;
}

interface Sample {
  family: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of one report: a counter or gauge is its value, a histogram its `_sum` and `_count`. */
function samplesOf(metric: ReportedMetric): Sample[] {
  const family = exportedName(metric.name);
  const labels = Object.fromEntries(Object.entries(metric.labels ?? {}).map(([key, value]) => [labelName(key), String(value).slice(0, 128)]));
  if (metric.type === 'histogram') {
    return [
      ...(typeof metric.sum === 'number' ? [{ family: `${family}_sum`, labels, value: metric.sum }] : []),
      ...(typeof metric.count === 'number' ? [{ family: `${family}_count`, labels, value: metric.count }] : []),
    ];
  }
  return typeof metric.value === 'number' && Number.isFinite(metric.value) ? [{ family, labels, value: metric.value }] : [];
}

/**
 * The last `agent.metrics` report of each connected agent, re-exported as `switchyard_agent_*`
 * gauges labelled by agent (docs/http-api.md#metrics). A family's label names are fixed by its first
 * sample; a later sample with other label names is left out rather than breaking the family.
 */
export class AgentMetricsExport {
  private readonly families = new Map<string, { gauge: Gauge; labelNames: string[] }>();
  private readonly latest = new Map<string, Sample[]>();

  constructor(private readonly registry: Registry) {}

  record(agentId: string, metrics: readonly ReportedMetric[]): void {
    const samples = metrics.flatMap(samplesOf).filter((sample) => this.familyFor(sample) !== null).slice(0, MAX_SERIES_PER_AGENT);
    this.latest.set(agentId, samples);
  }

  forget(agentId: string): void {
    this.latest.delete(agentId);
  }

  private familyFor(sample: Sample): Gauge | null {
    const known = this.families.get(sample.family);
    if (known) return sameNames(known.labelNames, Object.keys(sample.labels)) ? known.gauge : null;
    if (this.families.size >= MAX_FAMILIES || this.registry.getSingleMetric(sample.family)) return null;
    const labelNames = Object.keys(sample.labels).sort();
    const latest = this.latest;
    const name = sample.family;
    const gauge = new Gauge({
      name,
      help: `Reported by agents in agent.metrics (last report of each connected agent)`,
      labelNames: ['agent', ...labelNames],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [agent, samples] of latest) {
          for (const s of samples) if (s.family === name) this.set({ agent, ...s.labels }, s.value);
        }
      },
    });
    this.families.set(name, { gauge, labelNames });
    return gauge;
  }
}

function sameNames(expected: readonly string[], actual: readonly string[]): boolean {
  return expected.length === actual.length && [...actual].sort().every((name, index) => name === expected[index]);
}
