import type { RetentionReport } from '../retention/pass.ts';
import { CliUsageError, connect, help, parseCommandLine, processIo, runCli, type CliIo } from './client.ts';

const USAGE = `usage: switchyard retention [--older-than DURATION] [--dry-run] [--json] [--url U]

Runs one retention pass now on the running coordinator (docs/retention.md): every ended run whose
end is older than DURATION (default: SWITCHYARD_RETENTION_RUNS, 30d; 0s takes every ended run) is
archived into the blob store and its journal, snapshot and logs leave the database; processed
deliveries older than SWITCHYARD_RETENTION_DELIVERIES (14d) are removed. --dry-run counts only.
`;

/** `switchyard retention`: 0 done (also when some runs could not be archived: they are listed), 1 refused, 2 bad usage. */
export function runRetentionCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('retention', USAGE, io, async () => {
    const options = { 'older-than': { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' }, url: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;
    const { values, positionals } = parseCommandLine(argv, options);
    if (values.help) return help(io, USAGE);
    if (positionals.length > 0) throw new CliUsageError(`unexpected arguments: ${positionals.join(' ')}`);
    const body = { dryRun: values['dry-run'] === true, ...(values['older-than'] !== undefined && { olderThan: values['older-than'] }) };
    const { report } = await (await connect(env, values.url)).json<{ report: RetentionReport }>('POST', '/api/v1/retention', body);
    io.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : render(report));
    return 0;
  });
}

const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(2)} MiB`;

function render(report: RetentionReport): string {
  const verb = report.dryRun ? 'would archive' : 'archived';
  const rows = report.runs.rowsRemoved;
  const lines = [
    `${verb} ${report.runs.archived} runs${report.dryRun ? '' : ` into ${mib(report.runs.archiveBytes)} of archives`}: ${rows.run_events} journal events, ${rows.run_snapshots} snapshots, ${rows.job_logs} log chunks (${mib(report.runs.databaseBytesRemoved)} of database rows)`,
    `${report.dryRun ? 'would remove' : 'removed'} ${report.deliveries.removed} deliveries (${mib(report.deliveries.databaseBytesRemoved)})`,
    ...report.failed.map((failure) => `not archived: run ${failure.runId}: ${failure.reason}`),
    `took ${report.tookMs} ms`,
  ];
  return `${lines.join('\n')}\n`;
}
