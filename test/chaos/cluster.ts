import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export type CoordinatorState = 'down' | 'starting' | 'up' | 'stopped';

/** An exit nobody asked for: not our SIGKILL, not the fenced exit (code 3) after a lost lease. */
export interface UnexpectedExit {
  coordinatorId: string;
  code: number | null;
  signal: string | null;
  tail: string;
}

/**
 * One `switchyard start` child process that the chaos suite kills, stops and restarts. It keeps
 * its port across restarts, so agents and webhook senders find it again; its output goes to a file.
 */
export class ChaosCoordinator {
  state: CoordinatorState = 'down';
  child: ChildProcess | null = null;
  readonly unexpectedExits: UnexpectedExit[] = [];
  fencedExits = 0;
  private tail = '';
  private expectingKill = false;
  private readonly logFile: WriteStream;

  constructor(
    readonly id: string,
    readonly port: number,
    private readonly env: Record<string, string>,
    logDir: string,
  ) {
    this.logFile = createWriteStream(join(logDir, `${id}.log`), { flags: 'a' });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get wsUrl(): string {
    return `ws://127.0.0.1:${this.port}/ws/agent`;
  }

  /** Starts the process and waits for `/readyz`; false if it did not get ready in time. */
  async start(timeoutMs = 30_000): Promise<boolean> {
    if (this.state !== 'down') return this.state === 'up';
    this.state = 'starting';
    const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'start'], {
      cwd: ROOT,
      env: { ...process.env, ...this.env, PORT: String(this.port), SWITCHYARD_COORDINATOR_ID: this.id },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.expectingKill = false;
    const keep = (chunk: Buffer) => {
      this.logFile.write(chunk);
      this.tail = (this.tail + chunk.toString()).slice(-8000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.once('exit', (code, signal) => this.onExit(child, code, signal));
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && this.child === child && child.exitCode === null) {
      const res = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(1000) }).catch(() => null);
      if (res?.ok) {
        this.state = 'up';
        return true;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return false;
  }

  kill9(): void {
    if (!this.child || this.state === 'down') return;
    this.expectingKill = true;
    this.child.kill('SIGKILL');
  }

  stop(): void {
    if (this.state !== 'up' || !this.child) return;
    this.child.kill('SIGSTOP');
    this.state = 'stopped';
  }

  resume(): void {
    if (this.state !== 'stopped' || !this.child) return;
    this.child.kill('SIGCONT');
    this.state = 'up';
  }

  /** Waits until the process has exited (after kill9, or after a fenced exit). */
  async exited(timeoutMs = 15_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.state !== 'down' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    return this.state === 'down';
  }

  async shutdown(): Promise<void> {
    if (this.state === 'stopped') this.resume();
    if (this.child && this.state !== 'down') {
      this.expectingKill = true;
      this.child.kill('SIGTERM');
      if (!(await this.exited(10_000))) this.child.kill('SIGKILL');
      await this.exited(5_000);
    }
    await new Promise((resolve) => this.logFile.end(resolve));
  }

  private onExit(child: ChildProcess, code: number | null, signal: string | null): void {
    if (this.child !== child) return;
    this.child = null;
    this.state = 'down';
    if (this.expectingKill) return;
    if (code === 3) this.fencedExits++;
    else this.unexpectedExits.push({ coordinatorId: this.id, code, signal, tail: this.tail.slice(-3000) });
  }
}
