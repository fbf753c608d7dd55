import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { runAgentsCommand } from '../../../src/cli/agents.ts';
import type { CliIo } from '../../../src/cli/client.ts';
import { runLogsCommand } from '../../../src/cli/logs.ts';
import { runCancelCommand, runRerunCommand, runRunCommand, runRunsCommand } from '../../../src/cli/runs.ts';
import { findFreePort } from '../../../src/db/free-port.ts';
import { runSwitchyard, type CliResult } from '../../support/cli.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, runStepsWorkflow, spawnRealAgent, type RealAgentProcess } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Command = (argv: string[], env: NodeJS.ProcessEnv, io: CliIo) => Promise<number>;

/** The command's function with buffered output: for the argument checks, which happen before any request. */
async function inProcess(command: Command, argv: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const out = { stdout: '', stderr: '' };
  const io = { stdout: { write: (chunk: string) => ((out.stdout += chunk), true) }, stderr: { write: (chunk: string) => ((out.stderr += chunk), true) } };
  const code = await command(argv, env, io);
  return { code, ...out };
}

/** A failure is one line on stderr, never a stack trace. */
function failedInOneLine(result: CliResult, code: number, pattern: RegExp): void {
  assert.equal(result.code, code, result.stderr);
  assert.equal(result.stdout, '');
  const [first, ...rest] = result.stderr.split('\n');
  assert.match(first ?? '', pattern);
  if (code === 1) assert.deepEqual(rest, [''], 'one line only');
  assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
}

describe('switchyard runs, run, logs, cancel, rerun, agents against a running coordinator', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let agent: RealAgentProcess;
  let env: Record<string, string>;
  const label = `cli-${randomUUID().slice(0, 8)}`;
  let failedRun: string;
  let waitingRun: string;

  const cli = (...argv: string[]) => runSwitchyard(argv, env);

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-cli' });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    env = { SWITCHYARD_URL: coordinator.url, SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN };
    const { token } = await client.createToken();
    agent = spawnRealAgent({ wsUrl: client.wsUrl, token, labels: [label], agentId: `agent-${label}`, workDir: await tempDir('sy-cli-agent-') });
    const workflow = runStepsWorkflow('pipeline', label, [
      { name: 'build', steps: [['hello', 'echo hello'], ['compile', 'echo compiled']] },
      { name: 'test', needs: ['build'], steps: [['unit', 'echo testing; exit 3'], ['integration', 'echo never']] },
    ]);
    failedRun = await client.createRun(workflow, { ref: 'refs/heads/feature-x', sha: 'abc123' });
    await client.waitForRunStatus(failedRun, 'failed', 60_000);
    const waits = runStepsWorkflow('waits', `nobody-${label}`, [{ name: 'idle', steps: [['never', 'true']] }]);
    waitingRun = (await client.json<{ runId: string }>('/api/v1/runs', { method: 'POST', body: JSON.stringify({ repository: 'other/repo', workflow: waits }) }, 201)).runId;
  });
  after(async () => {
    await agent.kill();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  it('runs: a table of id, number, repository, workflow, ref, status, duration, age and origin, filtered by repository, status and limit', async () => {
    const [all, mine, failed, one, json] = await Promise.all([
      cli('runs'),
      cli('runs', '--repo', 'acme/app'),
      cli('runs', '--status', 'failed'),
      cli('runs', '--limit', '1'),
      cli('runs', '--json'),
    ]);
    assert.equal(all.code, 0, all.stderr);
    const lines = all.stdout.trimEnd().split('\n');
    assert.match(lines[0] ?? '', /^ID +# +REPOSITORY +WORKFLOW +REF +STATUS +DURATION +AGE +COMMIT$/);
    assert.match(all.stdout, new RegExp(`^${failedRun} +#\\d+ +acme/app +pipeline +feature-x +failed +[\\d.]+(ms|s|m) +\\d+[smhd] +started by an administrator \\(API\\)$`, 'm'));
    // A run started by hand for no branch shows none, not an invented `main`.
    assert.match(all.stdout, new RegExp(`^${waitingRun} +#1 +other/repo +waits +- +\\w+ +[\\d.]+(ms|s|m) +\\d+[smhd] +started by an administrator \\(API\\)$`, 'm'));
    assert.deepEqual([mine.stdout.includes(failedRun), mine.stdout.includes(waitingRun)], [true, false]);
    assert.deepEqual([failed.stdout.includes(failedRun), failed.stdout.includes(waitingRun)], [true, false]);
    assert.equal(one.stdout.trimEnd().split('\n').length, 2, 'header and one run');
    assert.equal((JSON.parse(json.stdout) as { runs: unknown[] }).runs.length, 2);
  });

  it('run <id>: the run and each job with attempts, agent, steps with status, duration and exit code', async () => {
    const shown = await cli('run', failedRun);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, new RegExp(`^run ${failedRun}  failed  #\\d+\n  workflow    pipeline\n  repository  acme/app @ feature-x \\(abc123\\)`));
    assert.match(shown.stdout, new RegExp(`^job build  success  attempt 1  agent agent-${label}  `, 'm'));
    assert.match(shown.stdout, /^ {2}0 +hello +success +\d+ms +-$/m, 'the agent reports no exit code for a step that succeeded');
    assert.match(shown.stdout, /^ {2}1 +compile +success +\d+ms +-$/m);
    assert.match(shown.stdout, new RegExp(`^job test  failed  attempt 1  agent agent-${label}  `, 'm'));
    assert.match(shown.stdout, /^ {2}0 +unit +failed +\d+ms +3 +exit code 3$/m);
    assert.match(shown.stdout, /^ {2}1 +integration +skipped +0ms +-$/m, 'the reference agent reports the steps after a failure skipped');
    const waiting = await cli('run', waitingRun);
    assert.match(waiting.stdout, /^job idle {2}\w+ {2}attempt \d+ .*\n {2}waiting: \S+/m);
    const hooked = await client.createRun({ ...runStepsWorkflow('hooked', `nobody-${label}`, [{ name: 'idle', steps: [['never', 'true']] }]), hasOnFailure: true });
    assert.match((await cli('run', hooked)).stdout, /^ {2}not supported {2}workflow hooked: its onFailure hook is not run here$/m);
    await client.cancel(hooked, { force: true });
    await client.waitForRunStatus(hooked, 'cancelled');
    assert.match((await cli('run', hooked)).stdout, /^ {2}0 +never +not run +- +-$/m, 'a step that never started is listed');
    const [byPrefix, byNumber] = await Promise.all([cli('run', failedRun.slice(0, 8)), cli('run', 'other/repo#1')]);
    assert.match(byPrefix.stdout, new RegExp(`^run ${failedRun}  failed  #\\d+\n`), 'the 8 characters the runs page shows');
    assert.match(byNumber.stdout, new RegExp(`^run ${waitingRun}  \\w+  #1\n(.*\n)*  started by  an administrator \\(API\\)$`, 'm'), 'repository#number');
    failedInOneLine(await cli('run', 'no-such-run'), 1, /^switchyard run: the coordinator answered 404 to GET \/api\/v1\/runs\/no-such-run: not found: no run no-such-run$/);
  });

  it('logs <id>: plain text per job and step; --job narrows; an unknown job is named', async () => {
    const [all, test, unknownJob, unknownRun] = await Promise.all([
      cli('logs', failedRun),
      cli('logs', failedRun, '--job', 'test'),
      cli('logs', failedRun, '--job', 'deploy'),
      cli('logs', 'no-such-run'),
    ]);
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(all.stdout.split('\n').filter(Boolean), ['[build › hello] hello', '[build › compile] compiled', '[test › unit] testing']);
    assert.equal(test.stdout, '[test › unit] testing\n');
    failedInOneLine(unknownJob, 1, /^switchyard logs: run \S+ has no job deploy \(its jobs: build, test\)$/);
    failedInOneLine(unknownRun, 1, /answered 404 .*no run no-such-run$/);
  });

  it('logs --follow prints lines as they come and returns once the run has ended', async () => {
    const workflow = runStepsWorkflow('slow', label, [{ name: 'slow', steps: [['wait', 'echo early; sleep 2; echo late']] }]);
    const runId = await client.createRun(workflow);
    const followed = await runSwitchyard(['logs', runId, '-f', '--interval', '0.2'], env, 60_000);
    assert.equal(followed.code, 0, followed.stderr);
    assert.equal(followed.stdout, '[slow › wait] early\n[slow › wait] late\n');
    assert.match(followed.stderr, new RegExp(`run ${runId} ended: success`));
  });

  it('cancel <id> cancels a running run; an ended one says so; rerun starts a linked run; --failed reruns only the failed job', async () => {
    const cancelled = await cli('cancel', waitingRun, '--force');
    assert.deepEqual([cancelled.code, cancelled.stdout], [0, `cancelling run ${waitingRun} (force)\n`]);
    await client.waitForRunStatus(waitingRun, 'cancelled');
    assert.equal((await cli('cancel', waitingRun)).stdout, `run ${waitingRun} already ended: cancelled\n`);
    failedInOneLine(await cli('cancel', 'no-such-run'), 1, /answered 404 to POST \/api\/v1\/runs\/no-such-run\/cancel: not found/);

    const rerun = await cli('rerun', failedRun);
    assert.equal(rerun.code, 0, rerun.stderr);
    const newRun = rerun.stdout.trim();
    assert.match(newRun, UUID);
    assert.match(rerun.stderr, new RegExp(`started run ${newRun}, a rerun of ${failedRun}`));
    await client.waitForRunStatus(newRun, 'failed', 60_000);
    assert.match((await cli('run', newRun)).stdout, new RegExp(`^ {2}rerun of {4}${failedRun}$`, 'm'));
    const failedOnly = await cli('rerun', failedRun, '--failed');
    assert.equal(failedOnly.code, 0, failedOnly.stderr);
    const onlyFailed = failedOnly.stdout.trim();
    const rerunView = await client.waitForRunStatus(onlyFailed, 'failed', 60_000);
    assert.deepEqual(rerunView.jobs.map((job) => [job.job_key, job.status, job.outcome]), [
      ['build', 'success', `carried over from run ${failedRun}`],
      ['test', 'failed', rerunView.jobs[1]?.outcome],
    ]);
    assert.ok(rerunView.jobs[1]?.attempt === 1, 'the failed job ran again');
    failedInOneLine(await cli('rerun', 'no-such-run'), 1, /answered 404 .*no run no-such-run/);
  });

  it('rerun of a run still running fails with the reason', async () => {
    const runId = await client.createRun(runStepsWorkflow('pending', `nobody-${label}`, [{ name: 'x', steps: [['s', 'true']] }]));
    failedInOneLine(await cli('rerun', runId), 1, new RegExp(`answered 409 .*run ${runId} is still \\w+; wait for it to end or cancel it, then rerun`));
    await client.cancel(runId, { force: true });
  });

  it('agents lists the connected agent with labels, slots and coordinator; disconnect of an unknown agent fails', async () => {
    const listed = await cli('agents');
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^AGENT +LABELS +SLOTS +COORDINATOR +CONNECTED +STATE +JOBS$/m);
    assert.match(listed.stdout, new RegExp(`^agent-${label} +${label},kici:\\S+ +0/\\d+ +coord-cli +\\d+[smhd] ago +ready +-$`, 'm'));
    failedInOneLine(await cli('agents', 'disconnect', 'nobody'), 1, /answered 404 to DELETE \/api\/v1\/agents\/nobody: not found: no connected agent nobody/);
  });

  it('bad flags exit 2 with the usage; --help exits 0; a wrong token or no coordinator exit 1 in one line', async () => {
    const usage: [Command, string[], RegExp][] = [
      [runRunsCommand, ['--limit', '0'], /--limit must be a whole number from 1 to 1000/],
      [runRunsCommand, ['--status', 'done'], /--status must be one of pending, held, running/],
      [runRunsCommand, ['--repo', 'noslash'], /--repo must be owner\/name/],
      [runRunCommand, [], /a run id is required/],
      [runLogsCommand, ['x', '--interval', '0'], /--interval must be/],
      [runCancelCommand, ['a', 'b'], /unexpected arguments: b/],
      [runRerunCommand, ['x', '--bogus'], /Unknown option '--bogus'/],
      [runAgentsCommand, ['frobnicate'], /unexpected arguments: frobnicate/],
    ];
    for (const [command, argv, reason] of usage) {
      const result = await inProcess(command, argv, env);
      assert.equal(result.code, 2, argv.join(' '));
      assert.match(result.stderr, reason);
      assert.match(result.stderr, /\nusage: switchyard \w+/);
    }
    for (const command of [runRunsCommand, runRunCommand, runLogsCommand, runCancelCommand, runRerunCommand, runAgentsCommand]) {
      const help = await inProcess(command, ['--help'], {});
      assert.deepEqual([help.code, /^usage: switchyard /.test(help.stdout)], [0, true]);
    }
    const spawnedHelp = await cli('logs', '--help');
    assert.deepEqual([spawnedHelp.code, spawnedHelp.stdout.split('\n')[0]], [0, 'usage: switchyard logs <id> [--job J] [-f|--follow] [--interval S] [--url U]']);
    const wrongToken = await runSwitchyard(['runs'], { SWITCHYARD_URL: coordinator.url, SWITCHYARD_ADMIN_TOKEN: 'sya_wrong' });
    failedInOneLine(wrongToken, 1, /answered 401 to GET \/api\/v1\/runs: unauthorized: .*SWITCHYARD_ADMIN_TOKEN/);
    const port = await findFreePort();
    const unreachable = await runSwitchyard(['run', 'x'], { SWITCHYARD_URL: `http://127.0.0.1:${port}`, SWITCHYARD_ADMIN_TOKEN: 'sya_x' });
    failedInOneLine(unreachable, 1, new RegExp(`cannot reach the coordinator at http://127.0.0.1:${port} \\(.*ECONNREFUSED.*\\)`));
  });
});
