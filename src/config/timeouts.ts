import type { JobTimeouts } from '../../machines/types.ts';
import type { CompiledConfig } from './config.ts';

/** Default job deadlines from configuration (DSP-3); a job's own timeout and grace override them. */
export function jobTimeoutsOf(config: CompiledConfig): JobTimeouts {
  return {
    ackMs: config.dispatchAckTimeoutMs,
    leaseMs: config.jobHeartbeatIntervalMs * config.staleMultiplier,
    recoveryMs: config.recoveryWindowMs,
    replayMs: config.replayGraceMs,
    queueMs: config.queueTimeoutMs,
    cancelGraceMs: 60_000,
    jobTimeoutMs: null,
  };
}
