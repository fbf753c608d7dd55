import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { Agent } from '../../../src/reference-agent/agent.ts';
import { compileAgentOptions, type AgentOptions } from '../../../src/reference-agent/options.ts';
import type { JobDispatch, SequentialStep } from '../../../src/ws/messages.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
export const AGENT_TOKEN = `kat_${'0123456789abcdef'.repeat(4)}`;
const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const cleanups: (() => Promise<void>)[] = [];

export async function cleanup(): Promise<void> {
  for (const fn of cleanups.splice(0).reverse()) await fn();
}

export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export interface TestRepo {
  url: string;
  sha: string;
  ref: string;
}

/** A real git repository on disk with one commit on `main`, reachable by `file://`. */
export async function createRepo(files: Record<string, string>): Promise<TestRepo> {
  const dir = await tempDir('sy-agent-repo-');
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();
  git('init', '--quiet', '--initial-branch=main');
  git('add', '.');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '--quiet', '-m', 'initial');
  return { url: `file://${dir}`, sha: git('rev-parse', 'HEAD'), ref: 'main' };
}

export function step(name: string, run: string | undefined, extra: Partial<SequentialStep> = {}): SequentialStep {
  return { name, hasOutputs: false, ...(run !== undefined && { run }), ...extra };
}

export function dispatchFor(repo: TestRepo | undefined, steps: JobDispatch['jobConfig']['steps'], extra: Partial<JobDispatch> = {}): JobDispatch {
  const { jobConfig, ...rest } = extra;
  return {
    type: 'job.dispatch',
    messageId: randomUUID(),
    runId: randomUUID(),
    jobId: randomUUID(),
    repoUrl: repo?.url ?? 'file:///nonexistent',
    ref: repo?.ref ?? 'main',
    sha: repo?.sha ?? '0'.repeat(40),
    lockFileUrl: '',
    timestamp: Date.now(),
    jobConfig: { name: 'job', steps, gracePeriod: 1, ...(repo === undefined && { checkout: false }), ...jobConfig },
    ...rest,
  };
}

export interface InProcessAgent {
  agent: Agent;
  exited: Promise<number>;
  workDir: string;
}

/** The agent in this process, with test-sized periods; stopped by `cleanup()`. */
export async function startAgent(url: string, options: Partial<AgentOptions> = {}, env: NodeJS.ProcessEnv = process.env): Promise<InProcessAgent> {
  const workDir = await tempDir('sy-agent-work-');
  const compiled = compileAgentOptions({
    url,
    token: AGENT_TOKEN,
    labels: ['linux', 'test'],
    workDir,
    agentId: `agent-${randomUUID().slice(0, 8)}`,
    reconnectBaseMs: 100,
    ...options,
  });
  const agent = new Agent(compiled, { log, env });
  const exited = agent.run();
  cleanups.push(async () => {
    agent.shutdown();
    agent.shutdown();
    await exited;
  });
  return { agent, exited, workDir };
}

export async function listDir(dir: string): Promise<string[]> {
  return readdir(dir);
}

export interface ChildAgent {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr: () => string;
}

/** `switchyard agent` as a child process, through the CLI. */
export function spawnAgent(args: string[]): ChildAgent {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/agent-cli.ts'), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return { child, exited, stderr: () => stderr };
}

/** True while a process with this pid exists and is not a zombie waiting to be reaped. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch (thrown: unknown) {
    if ((thrown as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw thrown;
  }
}

export async function waitUntil(check: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
