import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { configuredLabels, ownershipEnv, validateLabelSets } from './backend.ts';
import type {
  AgentResources,
  ExitListener,
  LabelSet,
  OwnedResource,
  ReloadResult,
  ScalerBackend,
  SpawnContext,
  SpawnCredentials,
  SpawnedAgent,
} from './backend.ts';
import { findMarkedProcesses, processAlive } from './process-table.ts';

export interface BareMetalOptions {
  name: string;
  installationId: string;
  labelSets: LabelSet[];
  maxAgents: number;
  /** The Switchyard checkout whose `src/cli/main.ts agent` is started. */
  repoRoot: string;
  /** Parent of each agent's work dir and log file. */
  stateDir: string;
  /** Variables passed through from the coordinator's environment (never its secrets). */
  baseEnv: Record<string, string>;
  killGraceMs: number;
  now: () => number;
  log: Logger;
}

const LOG_TAIL_CHARS = 600;

class AgentSpawnError extends Error {
  override readonly name = 'AgentSpawnError';
}

/**
 * Runs the reference agent as a child process in its own process group on this host
 * (orchestration.md SCL-13). Destroy: SIGTERM to the group, `killGraceMs`, then SIGKILL.
 */
export class BareMetalBackend implements ScalerBackend {
  readonly type = 'bare-metal' as const;
  readonly spawnsOnLocalHost = true;
  private sets: LabelSet[];
  private readonly children = new Map<string, ChildProcess>();
  private readonly listeners: ExitListener[] = [];

  constructor(private readonly options: BareMetalOptions) {
    const valid = validateLabelSets(options.labelSets);
    if (!valid.ok) throw new RangeError(`scaler ${options.name}: ${valid.errors.join('; ')}`);
    this.sets = options.labelSets;
  }

  get name(): string {
    return this.options.name;
  }

  get labelSets(): readonly LabelSet[] {
    return this.sets;
  }

  get maxAgents(): number {
    return this.options.maxAgents;
  }

  getActiveCount(): number {
    return this.children.size;
  }

  onExit(listener: ExitListener): void {
    this.listeners.push(listener);
  }

  async spawn(labelSet: LabelSet, agentId: string, orchestratorUrl: string, _limits: AgentResources, spawnContext: SpawnContext | null, credentials: SpawnCredentials): Promise<SpawnedAgent> {
    const workDir = join(this.options.stateDir, 'work', agentId);
    const logPath = this.logPath(agentId);
    mkdirSync(workDir, { recursive: true });
    mkdirSync(join(this.options.stateDir, 'logs'), { recursive: true });
    const args = ['--no-node-snapshot', '--import', 'tsx', join(this.options.repoRoot, 'src/cli/main.ts'), 'agent', '--url', orchestratorUrl, '--agent-id', agentId, '--work-dir', workDir];
    const labels = configuredLabels(labelSet);
    if (labels.length > 0) args.push('--labels', labels.join(','));
    const marks = ownershipEnv({ installationId: this.options.installationId, scaler: this.name, agentId, spawnContext });
    const env = { ...this.options.baseEnv, ...marks, SWITCHYARD_AGENT_TOKEN: credentials.token };
    const out = openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, args, { cwd: this.options.repoRoot, env, detached: true, stdio: ['ignore', out, out] });
    } finally {
      closeSync(out);
    }
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (error) => reject(new AgentSpawnError(`cannot start the agent process: ${error.message}`)));
    });
    const pid = child.pid as number;
    this.children.set(agentId, child);
    child.once('exit', (code, signal) => void this.exited(agentId, child, code, signal));
    this.options.log.info({ agentId, pid, scaler: this.name }, 'bare-metal agent started');
    return { id: agentId, labelSet, backendRef: String(pid), spawnedAt: this.options.now(), state: 'spawning' };
  }

  private logPath(agentId: string): string {
    return join(this.options.stateDir, 'logs', `${agentId}.log`);
  }

  private async exited(agentId: string, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (this.children.get(agentId) !== child) return;
    this.children.delete(agentId);
    const how = signal ? `was killed by ${signal}` : `exited with code ${code ?? 'unknown'}`;
    const tail = await readFile(this.logPath(agentId), 'utf8').then(
      (text) => lastLines(text),
      () => '',
    );
    const detail = `agent process ${how}${tail ? `; last output: ${tail}` : ''}`;
    for (const listener of this.listeners) listener(agentId, detail);
  }

  async destroy(agentId: string): Promise<void> {
    const child = this.children.get(agentId);
    const pid = child?.pid ?? (await this.findPid(agentId));
    if (pid !== undefined) await this.killGroup(pid);
    this.children.delete(agentId);
    await rm(join(this.options.stateDir, 'work', agentId), { recursive: true, force: true });
    await rm(this.logPath(agentId), { force: true });
  }

  private async findPid(agentId: string): Promise<number | undefined> {
    const owned = await this.listOwned();
    const found = owned.find((resource) => resource.agentId === agentId);
    return found ? Number(found.backendRef) : undefined;
  }

  private async killGroup(pid: number): Promise<void> {
    signalGroup(pid, 'SIGTERM');
    const deadline = Date.now() + this.options.killGraceMs;
    while (Date.now() < deadline && (await processAlive(pid))) await sleep(100);
    signalGroup(pid, 'SIGKILL');
  }

  async listOwned(): Promise<OwnedResource[]> {
    const found = await findMarkedProcesses({ SWITCHYARD_OWNER: this.options.installationId, SWITCHYARD_SCALER: this.name });
    return found.map(({ pid, env }) => ({
      agentId: env['SWITCHYARD_AGENT_ID'] ?? `pid-${pid}`,
      backendRef: String(pid),
      scaler: this.name,
      boundJobId: env['SWITCHYARD_BOUND_JOB_ID'] ?? null,
      runId: env['SWITCHYARD_RUN_ID'] ?? null,
    }));
  }

  async shutdownAll(): Promise<void> {
    await Promise.all([...this.children.keys()].map((agentId) => this.destroy(agentId)));
  }

  reload(labelSets: LabelSet[]): ReloadResult {
    const valid = validateLabelSets(labelSets);
    if (valid.ok) this.sets = labelSets;
    return valid;
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (thrown) {
    // ESRCH: the whole group is gone already, which is what we want.
    if ((thrown as NodeJS.ErrnoException).code !== 'ESRCH') throw thrown;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function lastLines(text: string): string {
  const trimmed = text.trim();
  return trimmed.length <= LOG_TAIL_CHARS ? trimmed : `…${trimmed.slice(-LOG_TAIL_CHARS)}`;
}
