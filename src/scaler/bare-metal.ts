import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { findFreePort } from '../db/free-port.ts';
import { kiciContractEnv, withoutUnknownKici } from '../config/agent-launch.ts';
import type { AgentLaunch, KiciLaunch } from '../config/agent-launch.ts';
import { configuredLabels, ownershipEnv, validateLabelSets } from './backend.ts';
import type { AgentResources, ExitListener, LabelSet, OwnedResource, ReloadResult, ScalerBackend, SpawnContext, SpawnCredentials, SpawnedAgent } from '../../actors/scaler/ports.ts';
import { findMarkedProcesses, processAlive } from './process-table.ts';

export interface BareMetalOptions {
  name: string;
  installationId: string;
  labelSets: LabelSet[];
  maxAgents: number;
  /** The agent each spawn starts: the reference agent, or a KiCI agent install. */
  agent: AgentLaunch;
  /** The Switchyard checkout whose `src/cli/main.ts agent` is started (reference agent). */
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

/** One agent process to start: program, arguments, working directory and its whole environment. */
interface Launch {
  program: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

/** What every spawn knows, whichever agent it starts. */
interface SpawnFacts {
  labelSet: LabelSet;
  agentId: string;
  orchestratorUrl: string;
  workDir: string;
  token: string;
  marks: Record<string, string>;
}

class AgentSpawnError extends Error {
  override readonly name = 'AgentSpawnError';
}

/**
 * Runs an agent (the reference agent, or a configured KiCI agent command) as a child process in
 * its own process group on this host (SCL-13, docs/requirements.md). Destroy: SIGTERM to the group,
 * `killGraceMs`, then SIGKILL.
 */
export class BareMetalBackend implements ScalerBackend {
  readonly type = 'bare-metal' as const;
  readonly spawnsOnLocalHost = true;
  private sets: LabelSet[];
  private readonly children = new Map<string, ChildProcess>();
  private readonly listeners: ExitListener[] = [];

  constructor(private readonly options: BareMetalOptions) {
    const valid = validateLabelSets(options.labelSets, options.agent.kind);
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
    mkdirSync(workDir, { recursive: true });
    mkdirSync(join(this.options.stateDir, 'logs'), { recursive: true });
    const marks = ownershipEnv({ installationId: this.options.installationId, scaler: this.name, agentId, spawnContext });
    const facts: SpawnFacts = { labelSet, agentId, orchestratorUrl, workDir, token: credentials.token, marks };
    const agent = this.options.agent;
    const launch = agent.kind === 'kici' ? await this.kiciLaunch(agent, facts) : this.referenceLaunch(facts);
    const out = openSync(this.logPath(agentId), 'a');
    let child: ChildProcess;
    try {
      child = spawn(launch.program, launch.args, { cwd: launch.cwd, env: launch.env, detached: true, stdio: ['ignore', out, out] });
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
    this.options.log.info({ agentId, pid, scaler: this.name, agent: agent.kind }, 'bare-metal agent started');
    return { id: agentId, labelSet, backendRef: String(pid), spawnedAt: this.options.now(), state: 'spawning' };
  }

  /** `switchyard agent` of this checkout, configured by its arguments; its token travels in the environment. */
  private referenceLaunch(facts: SpawnFacts): Launch {
    const main = join(this.options.repoRoot, 'src/cli/main.ts');
    const args = ['--no-node-snapshot', '--import', 'tsx', main, 'agent', '--url', facts.orchestratorUrl, '--agent-id', facts.agentId, '--work-dir', facts.workDir];
    const labels = configuredLabels(facts.labelSet);
    if (labels.length > 0) args.push('--labels', labels.join(','));
    const env = { ...this.options.baseEnv, ...facts.marks, SWITCHYARD_AGENT_TOKEN: facts.token };
    return { program: process.execPath, args, cwd: this.options.repoRoot, env };
  }

  /**
   * The configured command with the stock agent's environment contract (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with). Each
   * agent gets its own health port unless one is configured: the stock default (8080) would be
   * shared by every agent on this host, and is Switchyard's own default port too.
   */
  private async kiciLaunch(agent: KiciLaunch, facts: SpawnFacts): Promise<Launch> {
    const [program, ...args] = agent.command ?? [];
    if (program === undefined) throw new AgentSpawnError('a KiCI agent on bare metal needs agent.command');
    const contract = kiciContractEnv(agent, { orchestratorUrl: facts.orchestratorUrl, token: facts.token, agentId: facts.agentId, labels: configuredLabels(facts.labelSet) });
    const port: Record<string, string> = agent.env['KICI_PORT'] === undefined ? { KICI_PORT: String(await findFreePort('0.0.0.0')) } : {};
    const env = withoutUnknownKici({ ...this.options.baseEnv, ...port, ...contract, ...facts.marks });
    return { program, args, cwd: agent.workingDir ?? facts.workDir, env };
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
    const valid = validateLabelSets(labelSets, this.options.agent.kind);
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
