/**
 * A coordinator for a benchmark whose load (agents and client) runs in this process: on a worker
 * thread of its own (the default), or on this thread (`--one-thread`, the arrangement of the figures
 * before). On its own thread the coordinator gets a core of its own, as it has in production where
 * agents run on other machines; on one thread, the load's sockets, compression and HTTP client take
 * a share of the coordinator's event loop and the figures are a floor.
 *
 * Committed events reach `onCommitted` with the time they were committed, on the wall clock both
 * threads share (`wallNow`), so they can be set against times the load takes here.
 */
import { Worker } from 'node:worker_threads';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.ts';
import { startCoordinator } from '../src/main.ts';
import type { CommittedUpdate } from '../actors/runs/commit-observers.ts';
import { isTerminalRunStatus } from '../machines/status.ts';

/** What a benchmark reads of a committed event. */
export interface CommittedMark {
  runId: string;
  type: string;
  dispatchId?: string;
  status: string;
  at: number;
}

export interface BenchCoordinator {
  url: string;
  /** `thread`: on a worker thread of its own; `shared`: on the benchmark's own thread. */
  placement: 'thread' | 'shared';
  /** The coordinator thread's event-loop utilization since `since` (0–1: busy share of wall time). */
  utilization(since?: EventLoopUtilization): EventLoopUtilization;
  close(): Promise<void>;
}

/** Milliseconds on a clock every thread of the process reads alike (`performance.now()` is per thread). */
export function wallNow(): number {
  return performance.timeOrigin + performance.now();
}

export function markOf(update: CommittedUpdate, at: number): CommittedMark {
  const event = update.event as { type: string; dispatchId?: string };
  return { runId: update.runId, type: event.type, ...(event.dispatchId === undefined ? {} : { dispatchId: event.dispatchId }), status: update.status, at };
}

/** A worker thread on Node 20 does not run the process's `--import tsx`: it registers the loader itself. */
const WORKER_BOOT = `
const { workerData } = require('node:worker_threads');
import('tsx/esm/api').then((tsx) => { tsx.register(); return import(workerData.entry); });
`;

/**
 * The committed events a benchmark reads: a grant, an ack, a run's end. Only those cross to the
 * benchmark's thread: the others (run created, statuses) cost the coordinator thread a mark and a
 * structured clone each, for nothing.
 */
export function isReadMark(update: CommittedUpdate): boolean {
  const { type } = update.event as { type: string };
  return type === 'placement.granted' || type === 'agent.job.ack' || isTerminalRunStatus(update.status);
}

/** `onCommitted` null: the benchmark reads no committed event, and none is sent. */
export async function startBenchCoordinator(env: Record<string, string>, onCommitted: ((mark: CommittedMark) => void) | null, ownThread: boolean): Promise<BenchCoordinator> {
  if (!ownThread) {
    const coordinator = await startCoordinator(loadConfig(env), pino({ level: 'silent' }));
    if (onCommitted) coordinator.runtime.supervisor.observe((update) => isReadMark(update) && onCommitted(markOf(update, wallNow())));
    return { url: coordinator.url, placement: 'shared', utilization: (since) => performance.eventLoopUtilization(since), close: () => coordinator.close() };
  }
  const worker = new Worker(WORKER_BOOT, {
    eval: true,
    workerData: { env, marks: onCommitted !== null, entry: new URL('./coordinator-thread.worker.ts', import.meta.url).href },
    // The young generation `npm start` gives a coordinator (--max-semi-space-size=64): two semi-spaces and V8's large-object share.
    resourceLimits: { maxYoungGenerationSizeMb: 3 * 64 },
  });
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    worker.on('message', (message: { ready?: string; marks?: CommittedMark[] }) => {
      if (message.ready !== undefined) resolve(message.ready);
      for (const mark of message.marks ?? []) onCommitted?.(mark);
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the coordinator thread exited (${code}) before it was ready`)));
  });
  return {
    url,
    placement: 'thread',
    utilization: (since) => worker.performance.eventLoopUtilization(since),
    close: async () => {
      worker.postMessage('close');
      await exited;
    },
  };
}
