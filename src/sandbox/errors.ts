/**
 * `evaluate` was called on, or was still running when someone called, `dispose()`. This is a
 * shutdown race, not a fault of the expression: do not fail the job; let the run be resumed by
 * whichever coordinator owns it next.
 */
export class SandboxDisposedError extends Error {
  override readonly name = 'SandboxDisposedError';

  constructor(readonly jobName: string) {
    super(`The sandbox was disposed while evaluating an inline value of job ${jobName}`);
  }
}

/**
 * Node was started without `--no-node-snapshot`. On Node 20+ isolated-vm can then crash the whole
 * process (V8's shared read-only heap clashes with the isolates it creates), so the sandbox refuses
 * to start. Put the flag on the `node` command line (`process.execArgv`); NODE_OPTIONS is not checked.
 */
export class NodeSnapshotEnabledError extends Error {
  override readonly name = 'NodeSnapshotEnabledError';

  constructor(readonly execArgv: readonly string[]) {
    super('isolated-vm needs node to run with --no-node-snapshot; add the flag to the node command line');
  }
}
