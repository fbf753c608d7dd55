import Docker from 'dockerode';
import type { Logger } from 'pino';
import { findFreePort } from '../db/free-port.ts';
import { kiciContractEnv, withoutUnknownKici } from '../config/agent-launch.ts';
import type { AgentLaunch, KiciLaunch } from '../config/agent-launch.ts';
import { configuredLabels, ownershipEnv, ownershipLabels, validateLabelSets } from './backend.ts';
import type { AgentResources, ExitListener, LabelSet, OwnedResource, ReloadResult, ScalerBackend, SpawnContext, SpawnCredentials, SpawnedAgent } from '../../actors/scaler/ports.ts';
import { applyIsolationRules, buildIsolationRuleOps, nftAvailable, removeIsolationRules } from './nft.ts';
import type { IsolationPolicy } from './nft.ts';

export interface ContainerOptions {
  name: string;
  installationId: string;
  labelSets: LabelSet[];
  maxAgents: number;
  /** Docker API socket (Docker, or `podman system service`). */
  socketPath: string | null;
  /** A remote Docker API (`tcp://host:2375`); its containers do not run on this host (SCL-10). */
  remoteHost: string | null;
  image: string;
  /** The agent each container runs: the reference agent, or a KiCI agent image. */
  agent: AgentLaunch;
  /** The program that runs `switchyard` (reference agent); `agent …` arguments are appended. */
  command: string[];
  workingDir: string | null;
  /** `host` reaches a coordinator on loopback; `none` isolates completely; any other name is a bridge network. */
  network: string;
  binds: string[];
  ulimits: { name: string; soft: number; hard: number }[];
  /** nftables isolation for bridge networks (SCL-12); applied when `nft` is available. */
  isolation: IsolationPolicy | null;
  stopGraceSeconds: number;
  now: () => number;
  log: Logger;
}

/** What a container runs: `cmd` null keeps the image's own; `env` comes before the ownership marks. */
interface ContainerProcess {
  cmd: string[] | null;
  env: Record<string, string>;
}

const OWNER_LABEL = 'switchyard.owner';
const AGENT_LABEL = 'switchyard.agent-id';
const LOG_TAIL_LINES = 20;

/** Starts each agent as a container through the Docker API (SCL-13, docs/requirements.md). */
export class ContainerBackend implements ScalerBackend {
  readonly type = 'container' as const;
  private sets: LabelSet[];
  private readonly docker: Docker;
  private readonly active = new Set<string>();
  private readonly listeners: ExitListener[] = [];

  constructor(private readonly options: ContainerOptions) {
    const valid = validateLabelSets(options.labelSets, options.agent.kind);
    if (!valid.ok) throw new RangeError(`scaler ${options.name}: ${valid.errors.join('; ')}`);
    this.sets = options.labelSets;
    this.docker = options.remoteHost ? new Docker(remoteOptions(options.remoteHost)) : new Docker({ socketPath: options.socketPath ?? '/var/run/docker.sock' });
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

  get spawnsOnLocalHost(): boolean {
    return this.options.remoteHost === null;
  }

  getActiveCount(): number {
    return this.active.size;
  }

  onExit(listener: ExitListener): void {
    this.listeners.push(listener);
  }

  /** The engine answers (for status and tests). */
  async ping(): Promise<boolean> {
    return this.docker.ping().then(
      () => true,
      () => false,
    );
  }

  async spawn(labelSet: LabelSet, agentId: string, orchestratorUrl: string, limits: AgentResources, spawnContext: SpawnContext | null, credentials: SpawnCredentials): Promise<SpawnedAgent> {
    const marks = { installationId: this.options.installationId, scaler: this.name, agentId, spawnContext };
    const agent = this.options.agent;
    const launch = agent.kind === 'kici' ? await this.kiciProcess(agent, labelSet, agentId, orchestratorUrl, credentials.token) : this.referenceProcess(labelSet, agentId, orchestratorUrl, credentials.token);
    const env = { ...launch.env, ...ownershipEnv(marks) };
    const container = await this.docker.createContainer({
      name: agentId,
      Image: this.options.image,
      ...(launch.cmd && { Cmd: launch.cmd }),
      Env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
      Labels: ownershipLabels(marks),
      ...(this.options.workingDir && { WorkingDir: this.options.workingDir }),
      HostConfig: {
        NetworkMode: this.options.network,
        Binds: this.options.binds,
        Ulimits: this.options.ulimits.map(({ name, soft, hard }) => ({ Name: name, Soft: soft, Hard: hard })),
        ...(limits.memoryBytes > 0 && { Memory: limits.memoryBytes }),
        ...(limits.cpu > 0 && { NanoCpus: Math.round(limits.cpu * 1e9) }),
      },
    });
    this.active.add(agentId);
    try {
      await container.start();
      await this.isolate(container, agentId);
    } catch (thrown) {
      this.active.delete(agentId);
      await container.remove({ force: true, v: true }).catch(() => undefined);
      throw thrown;
    }
    void this.watch(container, agentId);
    this.options.log.info({ agentId, container: container.id, scaler: this.name }, 'agent container started');
    return { id: agentId, labelSet, backendRef: container.id, spawnedAt: this.options.now(), state: 'spawning' };
  }

  /** `switchyard agent` in the image, configured by its arguments. */
  private referenceProcess(labelSet: LabelSet, agentId: string, orchestratorUrl: string, token: string): ContainerProcess {
    const labels = configuredLabels(labelSet);
    const cmd = [...this.options.command, 'agent', '--url', orchestratorUrl, '--agent-id', agentId, '--work-dir', '/tmp/switchyard-agent'];
    if (labels.length > 0) cmd.push('--labels', labels.join(','));
    return { cmd, env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', SWITCHYARD_AGENT_TOKEN: token } };
  }

  /**
   * A KiCI agent image keeps its own PATH and command unless `agent.command` is set; it is configured
   * by the stock agent's environment contract. On the host network of this host each agent gets its
   * own health port (`KICI_PORT`), as on bare metal.
   */
  private async kiciProcess(agent: KiciLaunch, labelSet: LabelSet, agentId: string, orchestratorUrl: string, token: string): Promise<ContainerProcess> {
    const contract = kiciContractEnv(agent, { orchestratorUrl, token, agentId, labels: configuredLabels(labelSet) });
    const sharesHostPorts = this.options.network === 'host' && this.spawnsOnLocalHost && agent.env['KICI_PORT'] === undefined;
    const port: Record<string, string> = sharesHostPorts ? { KICI_PORT: String(await findFreePort('0.0.0.0')) } : {};
    return { cmd: agent.command, env: withoutUnknownKici({ ...port, ...contract }) };
  }

  private async isolate(container: Docker.Container, agentId: string): Promise<void> {
    const policy = this.options.isolation;
    if (!policy || ['host', 'none'].includes(this.options.network) || !this.spawnsOnLocalHost) return;
    if (!(await nftAvailable())) throw new Error('network isolation is configured but nft is not available on this host');
    const info = await container.inspect();
    const network = info.NetworkSettings.Networks[this.options.network];
    if (!network?.IPAddress || !network.Gateway) throw new Error(`container ${agentId} has no address on network ${this.options.network}`);
    await applyIsolationRules(buildIsolationRuleOps({ sourceIp: network.IPAddress, agentId }, network.Gateway, policy));
  }

  private async watch(container: Docker.Container, agentId: string): Promise<void> {
    const result = (await container.wait().catch(() => null)) as { StatusCode?: number } | null;
    if (!this.active.delete(agentId)) return;
    const tail = await this.logTail(container);
    const detail = `agent container exited with status ${result?.StatusCode ?? 'unknown'}${tail ? `; last output: ${tail}` : ''}`;
    for (const listener of this.listeners) listener(agentId, detail);
  }

  private async logTail(container: Docker.Container): Promise<string> {
    const raw = await container.logs({ stdout: true, stderr: true, tail: LOG_TAIL_LINES, follow: false }).catch(() => null);
    if (!raw) return '';
    // Multiplexed frames carry an 8-byte header each; keep only printable text.
    return [...raw.toString('utf8')].filter((ch) => ch >= ' ' || ch === '\n' || ch === '\t').join('').trim().slice(-600);
  }

  async destroy(agentId: string): Promise<void> {
    this.active.delete(agentId);
    const found = await this.docker.listContainers({ all: true, filters: { label: [`${OWNER_LABEL}=${this.options.installationId}`, `${AGENT_LABEL}=${agentId}`] } });
    for (const info of found) {
      const container = this.docker.getContainer(info.Id);
      await container.stop({ t: this.options.stopGraceSeconds }).catch(() => undefined);
      await container.remove({ force: true, v: true }).catch((error: { statusCode?: number }) => {
        if (error.statusCode !== 404) throw error;
      });
    }
    if (this.options.isolation && (await nftAvailable())) await removeIsolationRules(agentId);
  }

  /** Only containers labelled with this installation as owner and this scaler (SCL-11). */
  async listOwned(): Promise<OwnedResource[]> {
    const filters = { label: ['switchyard.managed=true', `${OWNER_LABEL}=${this.options.installationId}`, `switchyard.scaler=${this.name}`] };
    const found = await this.docker.listContainers({ all: true, filters });
    return found
      .filter((info) => info.Labels[OWNER_LABEL] === this.options.installationId)
      .map((info) => ({
        agentId: info.Labels[AGENT_LABEL] ?? info.Id,
        backendRef: info.Id,
        scaler: this.name,
        boundJobId: info.Labels['switchyard.bound-job-id'] ?? null,
        runId: info.Labels['switchyard.run-id'] ?? null,
      }));
  }

  async shutdownAll(): Promise<void> {
    await Promise.all([...this.active].map((agentId) => this.destroy(agentId)));
  }

  reload(labelSets: LabelSet[]): ReloadResult {
    const valid = validateLabelSets(labelSets, this.options.agent.kind);
    if (valid.ok) this.sets = labelSets;
    return valid;
  }
}

function remoteOptions(remote: string): Docker.DockerOptions {
  const url = new URL(remote.replace(/^tcp:/, 'http:'));
  return { host: url.hostname, port: Number(url.port || 2375), protocol: url.protocol === 'https:' ? 'https' : 'http' };
}
