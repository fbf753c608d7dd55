import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { findFreePort } from '../../../src/db/free-port.ts';
import { tempDir } from '../../support/database.ts';
import { eventually } from '../../support/runtime.ts';
import { planOf, readmeShellBlocks, type ShellBlock } from './readme-blocks.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const README = join(ROOT, 'README.md');

/**
 * A checkout to run the README in: every top-level entry of this one linked, so `npm start` and
 * `npm run -s switchyard` work as written, while `.switchyard` (the embedded default's data) is its own.
 */
async function checkoutLike(): Promise<string> {
  const dir = await tempDir('sy-readme-');
  await chmod(dir, 0o755); // as a checkout is: the embedded Postgres (user postgres, under root) enters it
  for (const entry of await readdir(ROOT)) if (!['.switchyard', '.git', 'test-artifacts'].includes(entry)) await symlink(join(ROOT, entry), join(dir, entry));
  return dir;
}

interface Shell {
  run(script: string): Promise<{ code: number | null; output: string }>;
}

/** Each block in its own `bash -e -o pipefail`, sharing the variables the earlier blocks set (TOKEN, REPO, RUN…). */
function shellIn(dir: string, port: number): Shell {
  const state = join(dir, '.readme-state.sh');
  return {
    run: async (script) => {
      await writeFile(join(dir, '.readme-block.sh'), `set -a\n[ -f ${state} ] && . ${state}\n${script}\nexport -p > ${state}\n`);
      const child = spawn('bash', ['-e', '-o', 'pipefail', '.readme-block.sh'], { cwd: dir, env: { ...process.env, PORT: String(port), CI: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      return { code, output };
    },
  };
}

const withPort = (text: string, port: number) => text.replaceAll(':8080', `:${port}`);

function startAsWritten(dir: string, startLine: string, port: number): { child: ChildProcess; output: () => string } {
  const child = spawn('bash', ['-c', startLine], { cwd: dir, env: { ...process.env, PORT: String(port), LOG_FORMAT: 'json' }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the README, run as written on the embedded default', () => {
  it('every shell block is run or excused with a reason; each run block succeeds, and the first example ends green', async (t) => {
    const blocks = await readmeShellBlocks(README);
    const unplanned = blocks.filter((block) => planOf(block) === null).map((block) => `line ${block.line}: ${block.text.split('\n')[0]}`);
    assert.deepEqual(unplanned, [], 'a README block neither run nor excused (list it in test/e2e/readme/readme-blocks.ts)');
    const starts = blocks.filter((block) => planOf(block)?.kind === 'start');
    const walkthroughStart = starts.map((block) => block.text.split('\n').find((line) => line.includes('npm start'))).find((line) => line?.includes('GITHUB_WEBHOOK_SECRET'));
    assert.ok(walkthroughStart, 'the walkthrough starts the coordinator with its webhook secret');
    const dir = await checkoutLike();
    const port = await findFreePort();
    const coordinator = startAsWritten(dir, walkthroughStart.replace(/#.*$/, '').trim(), port);
    t.after(async () => {
      const pid = coordinator.child.pid;
      if (pid !== undefined && groupAlive(pid)) process.kill(-pid, 'SIGINT'); // Ctrl-C, as the README says
      await eventually(() => pid === undefined || !groupAlive(pid), 60_000, 'npm start and everything it started to stop after Ctrl-C');
    });
    const ready = async () => {
      if (coordinator.child.exitCode !== null) throw new Error(`npm start exited ${coordinator.child.exitCode}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.ok;
    };
    await eventually(ready, 90_000, 'npm start to be ready').catch((error: unknown) => {
      throw new Error(`${String(error)}\n${coordinator.output().slice(-4000)}`);
    });
    const shell = shellIn(dir, port);
    for (const block of blocks) await runBlock(shell, block, port, coordinator.output);
  });
});

async function runBlock(shell: Shell, block: ShellBlock, port: number, coordinatorOutput: () => string): Promise<void> {
  const plan = planOf(block);
  if (plan?.kind !== 'run') return;
  if (plan.waitBefore === 'walkthrough run') {
    // "Within seconds": the pushed run exists once its delivery has been processed.
    await eventually(async () => (await shell.run('npm run -s switchyard -- runs --repo acme/hello --json')).output.includes('"run_id"'), 30_000, 'the pushed run');
  }
  const script = withPort((plan.rewrite ?? ((text: string) => text))(block.text), port);
  const { code, output } = await shell.run(script);
  const where = `README block at line ${block.line}; its output:\n${output}\n--- coordinator ---\n${coordinatorOutput().slice(-3000)}`;
  assert.equal(code, 0, where);
  assert.doesNotMatch(output, /"error":"/, `no API call refused; ${where}`);
  for (const pattern of plan.expect ?? []) assert.match(output, pattern, where);
}
