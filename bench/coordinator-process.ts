/**
 * `switchyard start` as a real child process, for benchmarks that kill it (test/support/processes.ts
 * does the same for tests but pulls in node:test). Its log (pino JSON lines on stderr) is kept.
 * `BENCH_COORDINATOR_NODE_ARGS` adds node flags to every coordinator it starts, after the usual ones,
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile them (node refuses `--cpu-prof` in NODE_OPTIONS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../src/db/free-port.ts';
import { CoordinatorClient } from '../test/support/fake-agent.ts';
import { sleep } from './support.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface LogLine {
  time: number;
  msg: string;
  [field: string]: unknown;
}

export class CoordinatorProcess {
  readonly logs: LogLine[] = [];
  private rest = '';
  private output = '';
  readonly exited: Promise<void>;

  private constructor(
    readonly child: ChildProcess,
    readonly client: CoordinatorClient,
    private readonly dataDir: string,
  ) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output = (this.output + chunk.toString()).slice(-4000)));
    child.stderr?.on('data', (chunk: Buffer) => this.read(chunk.toString()));
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  /** Starts a coordinator and waits until `/readyz` answers 200 (lease held, migrations applied). */
  static async start(env: Record<string, string>, adminToken: string): Promise<CoordinatorProcess> {
    const port = await findFreePort();
    const dataDir = await mkdtemp(join(tmpdir(), 'sy-bench-coord-'));
    const extraNodeArgs = process.env.BENCH_COORDINATOR_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    const child = spawn(process.execPath, ['--no-node-snapshot', '--max-semi-space-size=64', ...extraNodeArgs, '--import', 'tsx', 'src/cli/main.ts', 'start'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_ADMIN_TOKEN: adminToken, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const coordinator = new CoordinatorProcess(child, new CoordinatorClient(`http://127.0.0.1:${port}`, adminToken), dataDir);
    await coordinator.waitReady(30_000);
    return coordinator;
  }

  /** The first log line with this message (or one matching it), once it has been written. */
  async logged(msg: string | RegExp, timeoutMs: number): Promise<LogLine> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const line = this.logs.find((l) => (typeof msg === 'string' ? l.msg === msg : msg.test(l.msg)));
      if (line) return line;
      if (Date.now() > until) throw new Error(`no "${msg}" log within ${timeoutMs} ms:\n${this.output}`);
      await sleep(10);
    }
  }

  async kill9(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      await this.exited;
    }
    await rm(this.dataDir, { recursive: true, force: true });
  }

  private read(text: string): void {
    this.output = (this.output + text).slice(-4000);
    const lines = (this.rest + text).split('\n');
    this.rest = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const parsed = JSON.parse(line) as LogLine;
      this.logs.push(parsed);
    }
  }

  private async waitReady(timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (this.child.exitCode !== null) throw new Error(`coordinator exited early:\n${this.output}`);
      const res = await fetch(`${this.client.url}/readyz`).catch(() => null);
      if (res?.ok) return;
      if (Date.now() > until) {
        this.child.kill('SIGKILL');
        throw new Error(`coordinator not ready within ${timeoutMs} ms:\n${this.output}`);
      }
      await sleep(100);
    }
  }
}
