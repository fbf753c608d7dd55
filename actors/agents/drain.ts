import type { Logger } from 'pino';
import type { Dispatcher } from './dispatcher.ts';
import type { AgentRegistry } from './registry.ts';

const DRAIN_POLL_MS = 200;

export interface DrainOptions {
  /** Let running jobs finish for up to this long (new work is no longer placed). @default 0 */
  drainMs?: number;
  /** Ends the drain early (a second Ctrl-C). */
  abort?: AbortSignal;
}

/**
 * A clean stop lets running jobs finish: nothing new is placed, and the wait ends when no agent here
 * holds a slot, at `drainMs`, or on `abort`. The agents still busy then are returned: they are left
 * running, and reclaim their jobs from the restarted coordinator within the recovery window.
 */
export async function drainAgents(agents: { dispatcher: Dispatcher; registry: AgentRegistry }, options: DrainOptions, log: Logger): Promise<string[]> {
  agents.dispatcher.pause();
  const busy = () => agents.registry.all().filter((session) => session.slots.size > 0).map((session) => session.agentId);
  const until = Date.now() + (options.drainMs ?? 0);
  if (busy().length > 0 && Date.now() < until) log.info({ agents: busy().length, waitMs: options.drainMs }, 'draining: waiting for running jobs to finish (Ctrl-C again to stop now)');
  while (busy().length > 0 && Date.now() < until && options.abort?.aborted !== true) await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
  const left = busy();
  if (left.length > 0) log.warn({ agents: left }, 'stopping with jobs still running: their agents reclaim them after the restart');
  return left;
}
