import type { ForgeStatusState } from './intents.ts';
import type { TerminalRunStatus } from './status.ts';

/** GitHub caps a status description at 140 characters. */
const MAX_STATUS_DESCRIPTION = 140;

/** What the forge is told when the run ends: cancelled reports `error` (docs/http-api.md#commit-status-on-github). */
export function forgeReportOf(context: { cancel: { reason: string } | null; failureReason: string | null }, status: TerminalRunStatus): { state: ForgeStatusState; description: string } {
  const cut = (text: string) => (text.length > MAX_STATUS_DESCRIPTION ? `${text.slice(0, MAX_STATUS_DESCRIPTION - 1)}…` : text);
  if (status === 'success') return { state: 'success', description: 'All jobs succeeded' };
  if (status === 'cancelled') return { state: 'error', description: cut(`Cancelled: ${context.cancel?.reason ?? 'cancelled'}`) };
  return { state: 'failure', description: cut(context.failureReason ?? 'Failed') };
}

/** The commit-status context of a workflow's runs: one line per workflow on the commit. */
export function forgeStatusFor(workflowName: string): { context: string } {
  return { context: `switchyard/${workflowName}` };
}
