import type { Logger } from 'pino';
import type { ScalerAgent } from '../../machines/scaler.machine.ts';
import type { ScalerBackend } from './ports.ts';
import { coerceError } from '../../lib/errors.ts';

export interface StoredScaler {
  coordinatorId: string;
  machineVersion: number;
  snapshot: unknown;
  updatedAt: number;
}

/** The scaler's view of the database (src/db/scaler-state.ts implements it). */
export interface ScalerStore {
  load(): Promise<StoredScaler | null>;
  /** False when this coordinator is fenced. */
  save(snapshot: unknown): Promise<boolean>;
  /** Every coordinator's stored state. */
  all(): Promise<StoredScaler[]>;
  /** States of coordinators whose lease expired. */
  abandoned(): Promise<StoredScaler[]>;
  dropAbandoned(state: StoredScaler): Promise<boolean>;
}

export interface ReaperDeps {
  backends: ReadonlyMap<string, ScalerBackend>;
  store: ScalerStore;
  log: Logger;
  now: () => number;
}

/** The agent records in a stored snapshot, read defensively: it may come from another build. */
export function agentsIn(snapshot: unknown): Pick<ScalerAgent, 'agentId' | 'backend'>[] {
  const agents = (snapshot as { context?: { agents?: unknown } } | null)?.context?.agents;
  if (agents === null || typeof agents !== 'object') return [];
  return Object.values(agents as Record<string, unknown>).flatMap((value) => {
    const agent = value as Partial<ScalerAgent> | null;
    return typeof agent?.agentId === 'string' && typeof agent.backend === 'string' ? [{ agentId: agent.agentId, backend: agent.backend }] : [];
  });
}

/**
 * A dead coordinator's agents point at its URL and can never serve anyone else: destroy them,
 * then drop its state. A backend that runs on another host cannot be reached from here (SCL-10).
 */
export async function releaseAbandoned(deps: ReaperDeps): Promise<void> {
  for (const state of await deps.store.abandoned()) {
    let complete = true;
    for (const agent of agentsIn(state.snapshot)) {
      const backend = deps.backends.get(agent.backend);
      if (!backend) continue;
      try {
        await backend.destroy(agent.agentId);
      } catch (thrown) {
        complete = false;
        deps.log.warn({ agentId: agent.agentId, err: coerceError(thrown) }, 'cannot destroy an abandoned scaler agent');
      }
    }
    if (complete && (await deps.store.dropAbandoned(state))) {
      deps.log.warn({ coordinatorId: state.coordinatorId, agents: agentsIn(state.snapshot).length }, 'released the scaler agents of a coordinator whose lease expired');
    }
  }
}

/**
 * SCL-11: a resource with our owner label that no coordinator's state accounts for is an orphan.
 * Resources are listed before the states are read: a spawn is always recorded before it starts.
 */
export async function reapOrphans(deps: ReaperDeps, ownAgentIds: () => string[]): Promise<number> {
  let reaped = 0;
  for (const backend of deps.backends.values()) {
    const owned = await backend.listOwned().catch((thrown: unknown) => {
      deps.log.warn({ backend: backend.name, err: coerceError(thrown) }, 'cannot list scaler resources');
      return [];
    });
    if (owned.length === 0) continue;
    const known = new Set([...ownAgentIds(), ...(await deps.store.all()).flatMap((state) => agentsIn(state.snapshot).map((a) => a.agentId))]);
    for (const resource of owned.filter((r) => !known.has(r.agentId))) {
      deps.log.warn({ backend: backend.name, agentId: resource.agentId, ref: resource.backendRef }, 'reaping an orphaned scaler resource');
      await backend.destroy(resource.agentId);
      reaped += 1;
    }
  }
  return reaped;
}
