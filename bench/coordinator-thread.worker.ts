/**
 * The body of a benchmark coordinator on its own worker thread (bench/coordinator-thread.ts): starts
 * it, sends the marks of the committed events the benchmark reads (`isReadMark`), batched per turn
 * of the event loop, and closes it when told to.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.ts';
import { startCoordinator } from '../src/main.ts';
import { isReadMark, markOf, wallNow, type CommittedMark } from './coordinator-thread.ts';

const port = parentPort;
if (port === null) throw new Error('coordinator-thread.worker.ts runs as a worker thread');
const { env, marks } = workerData as { env: Record<string, string>; marks: boolean };
const coordinator = await startCoordinator(loadConfig(env), pino({ level: 'silent' }));

let pending: CommittedMark[] = [];
if (marks) {
  coordinator.runtime.supervisor.observe((update) => {
    if (!isReadMark(update)) return;
    if (pending.length === 0) setImmediate(flush);
    pending.push(markOf(update, wallNow()));
  });
}
function flush(): void {
  port?.postMessage({ marks: pending });
  pending = [];
}

port.on('message', (message: unknown) => {
  if (message !== 'close') return;
  // Exits this thread only, even if something the coordinator left open would keep its loop alive.
  void coordinator.close().finally(() => process.exit(0));
});
port.postMessage({ ready: coordinator.url });
