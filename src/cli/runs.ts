import { CliUsageError, connect, help, parseCommandLine, processIo, runCli, type CliIo } from './client.ts';
import { RUN_STATUSES, renderRunDetail, renderRunList, type RunDetail, type RunRow } from './run-view.ts';

const COORDINATOR_HELP = `The coordinator: --url, else $SWITCHYARD_URL, else http://$HOST:$PORT as 'switchyard start' binds.
The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

const RUNS_USAGE = `usage: switchyard runs [--repo owner/name] [--status S] [--limit N] [--json] [--url U]

Lists recent runs, newest first: id, repository, workflow, branch or tag, status, age.
  --repo owner/name   only runs of this repository
  --status S          only runs in status S (${RUN_STATUSES.join(', ')})
  --limit N           at most N runs, 1 to 1000 (default 50)
  --json              the API answer as JSON
${COORDINATOR_HELP}`;

const RUN_USAGE = `usage: switchyard run <id> [--json] [--url U]

Shows one run and its jobs: status, waiting reason, attempts, agent, steps (status, duration, exit
code) and outputs.
${COORDINATOR_HELP}`;

const CANCEL_USAGE = `usage: switchyard cancel <id> [--force] [--reason R] [--url U]

Cancels a run: its running jobs get their grace period; --force stops them at once.
${COORDINATOR_HELP}`;

const RERUN_USAGE = `usage: switchyard rerun <id> [--failed] [--url U]

Starts a new run of an ended run's workflow from the same source; prints the new run id on stdout.
  --failed   run only the jobs that failed or were cancelled, and their dependants; the jobs that
             succeeded are carried over (refused when no job failed)
${COORDINATOR_HELP}`;

const COMMON = { url: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 1000;

/** `switchyard runs`: 0 listed, 1 unreachable or refused, 2 bad usage. */
export function runRunsCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('runs', RUNS_USAGE, io, async () => {
    const options = { ...COMMON, repo: { type: 'string' }, status: { type: 'string' }, limit: { type: 'string' } } as const;
    const { values, positionals } = parseCommandLine(argv, options);
    if (values.help) return help(io, RUNS_USAGE);
    if (positionals.length > 0) throw new CliUsageError(`unexpected arguments: ${positionals.join(' ')}`);
    const query = new URLSearchParams({ limit: String(limitOf(values.limit)) });
    if (values.status !== undefined) {
      if (!RUN_STATUSES.includes(values.status)) throw new CliUsageError(`--status must be one of ${RUN_STATUSES.join(', ')}, got "${values.status}"`);
      query.set('status', values.status);
    }
    if (values.repo !== undefined) {
      if (!/^[^\s/]+\/[^\s/]+$/.test(values.repo)) throw new CliUsageError(`--repo must be owner/name, got "${values.repo}"`);
      query.set('repository', values.repo);
    }
    const answer = await (await connect(env, values.url)).json<{ runs: RunRow[] }>('GET', `/api/v1/runs?${query.toString()}`);
    io.stdout.write(values.json ? `${JSON.stringify(answer, null, 2)}\n` : renderRunList(answer.runs));
    return 0;
  });
}

/** `switchyard run <id>`: 0 shown, 1 unknown run or unreachable, 2 bad usage. */
export function runRunCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('run', RUN_USAGE, io, async () => {
    const { values, positionals } = parseCommandLine(argv, COMMON);
    if (values.help) return help(io, RUN_USAGE);
    const runId = oneRunId(positionals);
    const detail = await (await connect(env, values.url)).json<RunDetail>('GET', runPath(runId));
    io.stdout.write(values.json ? `${JSON.stringify(detail, null, 2)}\n` : renderRunDetail(detail));
    return 0;
  });
}

/** `switchyard cancel <id>`: 0 cancelling or already ended, 1 unknown run or unreachable, 2 bad usage. */
export function runCancelCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('cancel', CANCEL_USAGE, io, async () => {
    const options = { url: COMMON.url, help: COMMON.help, force: { type: 'boolean' }, reason: { type: 'string' } } as const;
    const { values, positionals } = parseCommandLine(argv, options);
    if (values.help) return help(io, CANCEL_USAGE);
    const runId = oneRunId(positionals);
    const body = { force: values.force === true, ...(values.reason === undefined ? {} : { reason: values.reason }) };
    const answer = await (await connect(env, values.url)).json<{ alreadyTerminal?: boolean; status?: string }>('POST', `${runPath(runId)}/cancel`, body);
    if (answer.alreadyTerminal) io.stdout.write(`run ${runId} already ended: ${answer.status ?? 'unknown'}\n`);
    else io.stdout.write(`cancelling run ${runId}${body.force ? ' (force)' : ''}\n`);
    return 0;
  });
}

/** `switchyard rerun <id>`: 0 started (new id on stdout), 1 refused or unreachable, 2 bad usage. */
export function runRerunCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('rerun', RERUN_USAGE, io, async () => {
    const options = { url: COMMON.url, help: COMMON.help, failed: { type: 'boolean' } } as const;
    const { values, positionals } = parseCommandLine(argv, options);
    if (values.help) return help(io, RERUN_USAGE);
    const runId = oneRunId(positionals);
    const answer = await (await connect(env, values.url)).json<{ runId: string }>('POST', `${runPath(runId)}/rerun`, { failedOnly: values.failed === true });
    io.stdout.write(`${answer.runId}\n`);
    io.stderr.write(`started run ${answer.runId}, a rerun of ${runId}\n`);
    return 0;
  });
}

export function runPath(runId: string): string {
  return `/api/v1/runs/${encodeURIComponent(runId)}`;
}

export function oneRunId(positionals: string[]): string {
  const [runId, ...rest] = positionals;
  if (runId === undefined || runId === '') throw new CliUsageError('a run id is required');
  if (rest.length > 0) throw new CliUsageError(`unexpected arguments: ${rest.join(' ')}`);
  return runId;
}

function limitOf(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const limit = Number(raw);
  if (!/^\d+$/.test(raw) || limit < 1 || limit > MAX_LIMIT) throw new CliUsageError(`--limit must be a whole number from 1 to ${MAX_LIMIT}, got "${raw}"`);
  return limit;
}
