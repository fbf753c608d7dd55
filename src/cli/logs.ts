import { setTimeout as sleep } from 'node:timers/promises';
import { CliError, CliUsageError, connect, help, parseCommandLine, processIo, runCli, type Api, type CliIo } from './client.ts';
import { isFinal, type RunDetail } from './run-view.ts';
import { oneRunId, runPath } from './runs.ts';

const USAGE = `usage: switchyard logs <id> [--job J] [-f|--follow] [--interval S] [--url U]

Prints a run's job logs as plain text, one line per log line: [job › step] text.
  --job J         only job J
  -f, --follow    keep printing new lines until the run has ended
  --interval S    seconds between polls with --follow (default 1)
The coordinator: --url, else $SWITCHYARD_URL, else http://$HOST:$PORT as 'switchyard start' binds.
The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

const OPTIONS = {
  url: { type: 'string' },
  job: { type: 'string' },
  follow: { type: 'boolean', short: 'f' },
  interval: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Chunks per request; a full page means there may be more. */
const PAGE = 1000;

interface LogChunk {
  id: number;
  jobKey: string;
  stepName: string;
  lines: string[];
}

/** `switchyard logs <id>`: 0 printed (with --follow: the run ended), 1 unknown run or job, unreachable, 2 bad usage. */
export function runLogsCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('logs', USAGE, io, async () => {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    if (values.help) return help(io, USAGE);
    const runId = oneRunId(positionals);
    const intervalMs = intervalOf(values.interval);
    const api = await connect(env, values.url);
    const detail = await api.json<RunDetail>('GET', runPath(runId));
    const job = values.job;
    if (job !== undefined && !detail.jobs.some((j) => j.job_key === job)) {
      throw new CliError(`run ${runId} has no job ${job} (its jobs: ${detail.jobs.map((j) => j.job_key).join(', ') || 'none'})`);
    }
    const after = await printNew(api, runId, job, 0, io);
    if (values.follow) await follow(api, runId, job, after, intervalMs, io);
    return 0;
  });
}

/** Polls until the run is final; the status is read before the logs, so the last pass prints every line. */
async function follow(api: Api, runId: string, job: string | undefined, printed: number, intervalMs: number, io: CliIo): Promise<void> {
  let after = printed;
  for (;;) {
    await sleep(intervalMs);
    const { run } = await api.json<RunDetail>('GET', runPath(runId));
    after = await printNew(api, runId, job, after, io);
    if (isFinal(run.status)) {
      io.stderr.write(`run ${runId} ended: ${run.status}\n`);
      return;
    }
  }
}

/** Prints every chunk after `after`, page by page; returns the last chunk id printed. */
async function printNew(api: Api, runId: string, job: string | undefined, after: number, io: CliIo): Promise<number> {
  let last = after;
  for (;;) {
    const query = new URLSearchParams({ after: String(last), limit: String(PAGE), ...(job === undefined ? {} : { job }) });
    const { chunks } = await api.json<{ chunks: LogChunk[] }>('GET', `${runPath(runId)}/logs?${query.toString()}`);
    let text = '';
    for (const chunk of chunks) {
      for (const line of chunk.lines) text += `[${chunk.jobKey} › ${chunk.stepName}] ${line}\n`;
      last = Math.max(last, chunk.id);
    }
    if (text) io.stdout.write(text);
    if (chunks.length < PAGE) return last;
  }
}

function intervalOf(raw: string | undefined): number {
  if (raw === undefined) return 1_000;
  const seconds = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw) || seconds < 0.1 || seconds > 60) throw new CliUsageError(`--interval must be a number of seconds from 0.1 to 60, got "${raw}"`);
  return Math.round(seconds * 1_000);
}
