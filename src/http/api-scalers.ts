import type { ScalerManager } from '../../actors/scaler/manager.ts';
import { DIAGNOSE_WINDOW_MS } from '../../actors/scaler/failure-tracker.ts';
import type { FailureTracker } from '../../actors/scaler/failure-tracker.ts';
import { sendJson } from './respond.ts';
import type { Router } from './router.ts';

export interface ScalerApiDeps {
  scaler: ScalerManager;
  tracker: FailureTracker;
  coordinatorId: string;
  now: () => number;
  /** Connected agents and jobs waiting for one, for the overview. */
  agentsConnected: () => number;
  jobsWaiting: () => number;
}

const RECENT_FAILURES = 20;

/** `GET /api/v1/scalers` (each backend's status) and `GET /api/v1/diagnose` (SCL-9: failures over 5 min). */
export function registerScalerRoutes(router: Router, deps: ScalerApiDeps): void {
  router
    .on('GET', '/api/v1/scalers', ({ res }) => sendJson(res, 200, deps.scaler.status()))
    .on('GET', '/api/v1/diagnose', ({ res }) => {
      const now = deps.now();
      const status = deps.scaler.status();
      sendJson(res, 200, {
        coordinatorId: deps.coordinatorId,
        at: now,
        windowMs: DIAGNOSE_WINDOW_MS,
        agentsConnected: deps.agentsConnected(),
        jobsWaitingForAgent: deps.jobsWaiting(),
        scaler: { enabled: status.enabled, state: status.state, caps: status.caps },
        backends: status.backends.map(({ labelSets: _labelSets, ...backend }) => backend),
        failuresByBackend: deps.tracker.recentByBackend(DIAGNOSE_WINDOW_MS, now),
        recentFailures: deps.tracker.entries().slice(-RECENT_FAILURES).reverse(),
      });
    });
}
