import type { TerminalRunStatus } from '../../machines/status.ts';

/** Run statuses after which a run needs no actor: it is never restored or adopted. */
export const TERMINAL_RUN_STATUSES = ['success', 'failed', 'cancelled'] as const satisfies readonly TerminalRunStatus[];
