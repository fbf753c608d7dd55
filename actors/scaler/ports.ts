/** The kinds of scaler backend (SCL-1, docs/requirements.md). */
export type ScalerType = 'bare-metal' | 'container';

/** Resources reserved for one agent (SCL-5); 0 means "not counted". */
export interface AgentResources {
  cpu: number;
  memoryBytes: number;
}

/** Keeps `size` idle agents of a label set registered (SCL-8). */
export interface WarmPool {
  size: number;
  idleTimeoutSeconds: number;
}

/** One set of labels a backend can start agents with (SCL-2). */
export interface LabelSet {
  /** Every label the spawned agent registers with, self-reported `kici:os|arch|host:*` included. */
  labels: string[];
  /** Taints: the agent only takes jobs that require each of these. */
  mandatoryLabels: string[];
  /** `properties` the agent reports: `switchyard.runSteps` for the reference agent, none for a KiCI agent. */
  properties: Record<string, string | number | boolean>;
  /** Reserved per agent; null takes the backend's default. */
  resources: AgentResources | null;
  warmPool: WarmPool | null;
}

/** Which job a spawn is for (SCL-3); null for a warm-pool spawn. */
export interface SpawnContext {
  boundJobId: string;
  runId: string;
}

export type SpawnedState = 'spawning' | 'running' | 'destroying';

export interface SpawnedAgent {
  id: string;
  labelSet: LabelSet;
  /** The backend's own handle: a process group id, a container id. */
  backendRef: string;
  spawnedAt: number;
  state: SpawnedState;
}

/** A resource this installation's backend owns, found by its labels or environment (SCL-4, SCL-11). */
export interface OwnedResource {
  agentId: string;
  backendRef: string;
  scaler: string;
  boundJobId: string | null;
  runId: string | null;
}

export type ReloadResult = { ok: true } | { ok: false; errors: string[] };

/** What a spawn needs beyond SCL-1's positional arguments: the agent's one credential. */
export interface SpawnCredentials {
  token: string;
}

/** Called when a spawned agent's process or container ends on its own. */
export type ExitListener = (agentId: string, detail: string) => void;

/**
 * A way to start agents (SCL-1, docs/requirements.md). Implementations do I/O only; every decision
 * (caps, binding, timeouts) is the scaler machine's. `destroy` and `shutdownAll` are idempotent.
 */
export interface ScalerBackend {
  readonly type: ScalerType;
  readonly name: string;
  readonly labelSets: readonly LabelSet[];
  readonly maxAgents: number;
  /** Per-backend resource caps (SCL-5); absent or null is unlimited. */
  readonly maxCpu?: number | null;
  readonly maxMemoryBytes?: number | null;
  readonly spawnsOnLocalHost: boolean;
  /** Agents this instance started and has not seen end, spawning included. */
  getActiveCount(): number;
  spawn(
    labelSet: LabelSet,
    agentId: string,
    orchestratorUrl: string,
    limits: AgentResources,
    spawnContext: SpawnContext | null,
    credentials: SpawnCredentials,
  ): Promise<SpawnedAgent>;
  destroy(agentId: string): Promise<void>;
  listOwned(): Promise<OwnedResource[]>;
  /** Ends every agent this instance started (coordinator shutdown). */
  shutdownAll(): Promise<void>;
  reload(labelSets: LabelSet[]): ReloadResult;
  onExit(listener: ExitListener): void;
}
