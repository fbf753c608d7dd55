/**
 * The stage budget of a webhook's way to its first `job.dispatch`, read from the coordinator's
 * `switchyard_dispatch_path_stage_seconds` histogram (marks taken on the real path, lib/stage-trace.ts):
 * `sample` before and after a phase, `budget` of the two is each stage's mean in that phase.
 */
const SERIES = 'switchyard_dispatch_path_stage_seconds';
const STAGE_LINE = new RegExp(`^${SERIES}_(sum|count)\\{stage="([^"]+)"\\} (\\S+)$`);

export type StageSample = Map<string, { sum: number; count: number }>;

export interface StageLine {
  stage: string;
  meanMs: number;
  /** Share of the mean whole way (`total`). */
  share: number;
  count: number;
}

/** Sums and counts per stage in a /metrics text. */
export function sampleStages(metrics: string): StageSample {
  const stages: StageSample = new Map();
  for (const line of metrics.split('\n')) {
    const match = STAGE_LINE.exec(line);
    if (!match) continue;
    const [, kind, stage, value] = match as unknown as [string, 'sum' | 'count', string, string];
    const entry = stages.get(stage) ?? { sum: 0, count: 0 };
    entry[kind] = Number(value);
    stages.set(stage, entry);
  }
  return stages;
}

/** Each stage's mean over the deliveries traced between the two samples, in path order, `total` last. */
export function stageBudget(before: StageSample, after: StageSample): StageLine[] {
  const delta = (stage: string) => {
    const [a, b] = [after.get(stage), before.get(stage) ?? { sum: 0, count: 0 }];
    return a ? { sum: a.sum - b.sum, count: a.count - b.count } : { sum: 0, count: 0 };
  };
  const total = delta('total');
  const lines = [...after.keys()].map((stage) => {
    const d = delta(stage);
    // Per traced delivery: a stage some deliveries skip counts as zero for them (and `total`'s own mean is its mean).
    const meanMs = total.count === 0 ? 0 : (d.sum / total.count) * 1000;
    return { stage, meanMs: Math.round(meanMs * 1000) / 1000, share: Math.round((d.sum / (total.sum || 1)) * 1000) / 10, count: d.count };
  });
  return [...lines.filter((l) => l.stage !== 'total' && l.count > 0), ...lines.filter((l) => l.stage === 'total')];
}

export function printBudget(lines: StageLine[], unitMs: number): void {
  console.log(`\nwhere a delivery's time goes, webhook → job.dispatch sent, one at a time (mean per delivery; bare commit = ${unitMs} ms)\n`);
  console.log(`${'stage'.padEnd(22)} ${'ms'.padStart(8)} ${'share'.padStart(7)} ${'commits'.padStart(8)}`);
  for (const l of lines) console.log(`${l.stage.padEnd(22)} ${l.meanMs.toFixed(3).padStart(8)} ${`${l.share}%`.padStart(7)} ${(l.meanMs / unitMs).toFixed(2).padStart(8)}`);
}
