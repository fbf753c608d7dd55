import { randomUUID } from 'node:crypto';
import { cpus, freemem, release, totalmem, userInfo, version as osVersion } from 'node:os';
import type { InFlightJob, JobDispatch } from '../../src/ws/messages.ts';
import { agentTemplate, objectAt, type WireFrame } from './kici-wire-fixture.ts';

/** The stock agent release whose wire behaviour the test agent copies. */
export const STOCK_AGENT_VERSION = '0.1.24';

/** Who the agent is: everything its frames say about it. */
export interface AgentIdentity {
  agentId: string;
  /** `KICI_ORCHESTRATOR_URL`, used verbatim. */
  url: string;
  token: string | undefined;
  /** Configured labels (`KICI_LABELS`), without the auto-labels. */
  labels: readonly string[];
  /** `kici:role:*` roles, e.g. `['builder', 'init-runner']`. */
  roles: readonly string[];
  hostname: string;
  platform: NodeJS.Platform;
  arch: string;
}

export type StepOutcome = 'success' | 'failed' | 'skipped' | 'cancelled';

/** Sets each key of `patch` on `frame`, and deletes the keys whose value is undefined (absent, never null). */
function assign<T extends Record<string, unknown>>(frame: T, patch: Record<string, unknown>): T {
  const target: Record<string, unknown> = frame;
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) delete target[key];
    else target[key] = value;
  }
  return frame;
}

/** The labels the stock agent sends: configured ones, then os, arch, host and roles (protocol.md §6). */
export function stockLabels(identity: AgentIdentity): string[] {
  const os: Partial<Record<NodeJS.Platform, string[]>> = { darwin: ['macos', 'darwin'], win32: ['windows', 'win32'] };
  const archs: Record<string, string[]> = { x64: ['x64', 'amd64'] };
  return [
    ...identity.labels,
    ...(os[identity.platform] ?? [identity.platform]).map((name) => `kici:os:${name}`),
    ...(archs[identity.arch] ?? [identity.arch]).map((name) => `kici:arch:${name}`),
    `kici:host:${identity.hostname}`,
    ...identity.roles.map((role) => `kici:role:${role}`),
  ];
}

/**
 * Builds every agent frame from a real frame of the recorded stock session, rewriting only ids,
 * timestamps, names and outcome data, so the key sets and their order stay the stock agent's.
 */
export class KiciFrames {
  constructor(
    private readonly identity: AgentIdentity,
    private readonly now: () => number = Date.now,
  ) {}

  register(inFlightJobs: readonly InFlightJob[]): WireFrame {
    const { agentId, platform, arch, hostname } = this.identity;
    return assign(agentTemplate('agent.register'), {
      ...{ messageId: `register-${agentId}-${this.now()}`, agentId, labels: stockLabels(this.identity), platform, arch, hostname },
      ...{ osRelease: release(), osVersion: osVersion(), totalMemoryMb: Math.round(totalmem() / 1024 / 1024), cpuCount: cpus().length },
      ...{ nodeVersion: process.versions.node, version: STOCK_AGENT_VERSION, runningAsUser: userInfo().username },
      runningAsUid: process.getuid?.(),
      inFlightJobs: inFlightJobs.length > 0 ? inFlightJobs.map(({ jobId, runId }) => ({ jobId, runId })) : undefined,
    });
  }

  configAck(): WireFrame {
    const { agentId } = this.identity;
    return assign(agentTemplate('config.ack'), { messageId: `config-ack-${agentId}-${this.now()}`, agentId });
  }

  heartbeat(): WireFrame {
    return assign(agentTemplate('heartbeat'), { timestamp: this.now() });
  }

  agentLog(lines: readonly string[]): WireFrame {
    return assign(agentTemplate('agent.log'), { messageId: randomUUID(), agentId: this.identity.agentId, lines: [...lines], timestamp: this.now() });
  }

  /** The one `agent.log` line that precedes every replay after `register.ack` (protocol.md §10.1). */
  gapMarker(offlineMs: number, events: number, logLines: number): WireFrame {
    const seconds = Math.round(offlineMs / 1000);
    return this.agentLog([`--- Orchestrator offline for ${seconds}s. Replaying ${events} buffered events and ${logLines} buffered log lines. ---`]);
  }

  /** A structured log line shaped like the stock agent's own (`agent.log` content). */
  logLine(message: string, fields: Record<string, unknown> = {}): string {
    return JSON.stringify({ ...fields, level: 'info', message, service: 'agent', timestamp: new Date(this.now()).toISOString() });
  }

  agentStatus(activeJobs: number): WireFrame {
    const memory = process.memoryUsage();
    return assign(agentTemplate('agent.status'), {
      ...{ messageId: randomUUID(), agentId: this.identity.agentId, activeJobs },
      ...{ memoryUsedMb: Math.round(memory.rss / 1024 / 1024), memoryAvailableMb: Math.round(freemem() / 1024 / 1024) },
      uptimeSeconds: Math.round(process.uptime()),
    });
  }

  /** The recorded metric set, with the job counters replaced by this agent's. */
  agentMetrics(jobsByStatus: Readonly<Record<string, number>>, activeJobs: number): WireFrame {
    const frame = agentTemplate('agent.metrics');
    const recorded = Array.isArray(frame['metrics']) ? (frame['metrics'] as unknown[]) : [];
    const others = recorded.filter((metric) => {
      const name = typeof metric === 'object' && metric !== null && 'name' in metric ? metric.name : undefined;
      return name !== 'kici_agent_jobs_total' && name !== 'kici_agent_jobs_active';
    });
    const jobs = Object.entries(jobsByStatus).map(([status, value]) => ({ name: 'kici_agent_jobs_total', type: 'counter', value, labels: { status } }));
    const active = { name: 'kici_agent_jobs_active', type: 'upDownCounter', value: activeJobs };
    return assign(frame, { messageId: randomUUID(), agentId: this.identity.agentId, metrics: [...jobs, active, ...others], timestamp: this.now() });
  }

  jobAck(dispatch: JobDispatch): WireFrame {
    return assign(agentTemplate('job.ack'), { messageId: randomUUID(), ...ids(dispatch), timestamp: this.now() });
  }

  /** Not in the recording (no job was refused there): built from protocol.md §9.2. */
  jobReject(dispatch: JobDispatch, reason: 'busy' | 'draining'): WireFrame {
    return { type: 'job.reject', messageId: randomUUID(), ...ids(dispatch), reason, timestamp: this.now() };
  }

  /** Not in the recording (every job there was shorter than 60 s): built from protocol.md §9.2. */
  jobHeartbeat(dispatch: JobDispatch): WireFrame {
    return { type: 'job.heartbeat', ...ids(dispatch), timestamp: this.now() };
  }

  jobRunning(dispatch: JobDispatch): WireFrame {
    const template = agentTemplate('job.status', (f) => f['state'] === 'running' && f['data'] === undefined);
    return assign(template, { messageId: randomUUID(), ...ids(dispatch), timestamp: this.now() });
  }

  /** A terminal `job.status`; `data` is outcome data (durationMs, stepResults, outputs, init fields). */
  jobTerminal(dispatch: JobDispatch, state: 'success' | 'failed' | 'cancelled', data: Record<string, unknown>): WireFrame {
    const recorded = state === 'success' ? 'success' : 'failed';
    const template = agentTemplate('job.status', (f) => f['state'] === recorded && objectAt(f, 'data')?.['stepResults'] !== undefined);
    return assign(template, { messageId: randomUUID(), ...ids(dispatch), state, timestamp: this.now(), data });
  }

  jobContext(dispatch: JobDispatch, workingDirectory: string): WireFrame {
    const template = agentTemplate('job.context', (f) => objectAt(f, 'context')?.['sandboxType'] === 'bare-metal');
    const context = objectAt(template, 'context') ?? {};
    const { platform, arch } = this.identity;
    const runtime = { nodeVersion: process.version, os: platform, arch };
    const envVars = this.envVars(context['envVars']);
    return assign(template, { ...ids(dispatch), context: assign({ ...context }, { runtime, workingDirectory, gitRef: dispatch.ref, envVars }) });
  }

  runEvent(dispatch: JobDispatch, eventType: string, durationMs: number | null, status?: string): WireFrame {
    const template = agentTemplate('run.event', (f) => f['eventType'] === eventType);
    const metadata = status === undefined ? undefined : { status };
    return assign(template, { ...ids(dispatch), timestampMs: this.now(), durationMs, metadata });
  }

  logChunk(dispatch: JobDispatch, stepIndex: number, lines: readonly string[]): WireFrame {
    return assign(agentTemplate('log.chunk'), { messageId: randomUUID(), ...ids(dispatch), stepIndex, lines: [...lines], timestamp: this.now() });
  }

  stepRunning(dispatch: JobDispatch, stepIndex: number, stepName: string): WireFrame {
    const template = agentTemplate('step.status', (f) => f['state'] === 'running');
    return assign(template, { messageId: randomUUID(), ...ids(dispatch), stepIndex, stepName, timestamp: this.now() });
  }

  /** A terminal `step.status`: `data` holds durationMs and, for a failure, `error{message, exitCode?}`. */
  stepTerminal(dispatch: JobDispatch, step: { index: number; name: string; state: StepOutcome; data: Record<string, unknown>; logBytes: number }): WireFrame {
    const recorded = step.state === 'failed' ? 'failed' : 'success';
    const template = agentTemplate('step.status', (f) => f['state'] === recorded && f['data'] !== undefined);
    return assign(template, {
      ...{ messageId: randomUUID(), ...ids(dispatch), stepIndex: step.index, stepName: step.name, state: step.state, timestamp: this.now() },
      ...{ data: step.data, secretsAccessed: [], logBytesStreamed: step.logBytes },
    });
  }

  /** The `KICI_*` configuration as `system` variables, then the recorded `user` names with this process's values. */
  private envVars(recorded: unknown): { name: string; value: string; category: string }[] {
    const { url, agentId, labels, token } = this.identity;
    const system = { KICI_ORCHESTRATOR_URL: url, KICI_AGENT_ID: agentId, KICI_LABELS: labels.join(','), KICI_AGENT_TOKEN: token ?? '' };
    const vars = Object.entries(system)
      .filter(([, value]) => value !== '')
      .map(([name, value]) => ({ name, value, category: 'system' }));
    const userNames = (Array.isArray(recorded) ? recorded : [])
      .map((entry: unknown) => (typeof entry === 'object' && entry !== null && 'name' in entry && 'category' in entry && entry.category === 'user' ? entry.name : undefined))
      .filter((name): name is string => typeof name === 'string');
    for (const name of userNames) {
      const value = process.env[name];
      if (value !== undefined) vars.push({ name, value, category: 'user' });
    }
    return vars;
  }
}

function ids(dispatch: JobDispatch): { runId: string; jobId: string } {
  return { runId: dispatch.runId, jobId: dispatch.jobId };
}
