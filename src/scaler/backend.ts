import type { AgentKind } from '../config/agent-launch.ts';
import type { LabelSet, ReloadResult, SpawnContext } from '../../actors/scaler/ports.ts';

/** The environment (bare metal) or container labels (containers) that make SpawnContext visible (SCL-4). */
export interface OwnershipMarks {
  installationId: string;
  scaler: string;
  agentId: string;
  spawnContext: SpawnContext | null;
}

export function ownershipEnv(marks: OwnershipMarks): Record<string, string> {
  return {
    SWITCHYARD_MANAGED: 'true',
    SWITCHYARD_OWNER: marks.installationId,
    SWITCHYARD_AGENT_ID: marks.agentId,
    SWITCHYARD_SCALER: marks.scaler,
    ...(marks.spawnContext && { SWITCHYARD_BOUND_JOB_ID: marks.spawnContext.boundJobId, SWITCHYARD_RUN_ID: marks.spawnContext.runId }),
  };
}

export function ownershipLabels(marks: OwnershipMarks): Record<string, string> {
  return {
    'switchyard.managed': 'true',
    'switchyard.owner': marks.installationId,
    'switchyard.agent-id': marks.agentId,
    'switchyard.scaler': marks.scaler,
    ...(marks.spawnContext && { 'switchyard.bound-job-id': marks.spawnContext.boundJobId, 'switchyard.run-id': marks.spawnContext.runId }),
  };
}

/** Labels the agent adds by itself; `--labels` and `KICI_LABELS` must not carry them (the `kici:` prefix is reserved there). */
export function configuredLabels(labelSet: LabelSet): string[] {
  return labelSet.labels.filter((label) => !label.startsWith('kici:'));
}

/** The `kici:` labels an agent registers by itself: a KiCI agent adds its roles (docs/protocol.md#labels-executors-and-matching). */
const SELF_REPORTED: Record<AgentKind, RegExp> = {
  reference: /^kici:(os|arch|host):/,
  kici: /^kici:((os|arch|host):|role:(builder|init-runner)$)/,
};

/** Validation shared by every backend's `reload`; `agent` is the kind of agent the backend starts. */
export function validateLabelSets(labelSets: readonly LabelSet[], agent: AgentKind = 'reference'): ReloadResult {
  const errors: string[] = [];
  if (labelSets.length === 0) errors.push('a backend needs at least one label set');
  labelSets.forEach((set, index) => {
    if (set.labels.length === 0) errors.push(`labelSets[${index}]: no labels`);
    const missing = set.mandatoryLabels.filter((label) => !set.labels.includes(label));
    if (missing.length > 0) errors.push(`labelSets[${index}]: mandatory labels ${missing.join(', ')} are not among its labels`);
    const foreign = set.labels.filter((label) => label.startsWith('kici:') && !SELF_REPORTED[agent].test(label));
    const reported = agent === 'kici' ? 'kici:os|arch|host and its roles' : 'kici:os|arch|host';
    if (foreign.length > 0) errors.push(`labelSets[${index}]: the agent cannot register ${foreign.join(', ')} (only ${reported} are self-reported)`);
  });
  return errors.length === 0 ? { ok: true } : { ok: false, errors };
}
