/** This coordinator lost ownership: its epoch changed. It must stop its actors and write nothing more. */
export class FencedError extends Error {
  override readonly name = 'FencedError';
  constructor(
    readonly coordinatorId: string,
    readonly epoch: number,
    detail = 'coordinator epoch changed',
  ) {
    super(`coordinator ${coordinatorId} (epoch ${epoch}) is fenced: ${detail}`);
  }
}

/** The supervisor was stopped (shutdown or lost ownership); it accepts no more events. */
export class SupervisorStoppedError extends Error {
  override readonly name = 'SupervisorStoppedError';
  constructor() {
    super('the supervisor is stopped and accepts no more events');
  }
}

/** The run is not owned by this coordinator (never created here, finished, or adopted elsewhere). */
export class RunNotOwnedError extends Error {
  override readonly name = 'RunNotOwnedError';
  constructor(readonly runId: string) {
    super(`run ${runId} is not owned by this coordinator`);
  }
}

/** A stored snapshot was written by a machine version this build cannot read (DESIGN.md §5). */
export class UnknownMachineVersionError extends Error {
  override readonly name = 'UnknownMachineVersionError';
  constructor(
    readonly runId: string,
    readonly machineId: string,
    readonly machineVersion: number,
    readonly supported: number,
  ) {
    super(
      `run ${runId}: snapshot of machine ${machineId} version ${machineVersion} cannot be restored by this build (supports version ${supported}); the run is left as stored`,
    );
  }
}

/** Turns whatever was thrown into an Error, so logs and reasons always have a message. */
export function coerceError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(typeof thrown === 'string' ? thrown : JSON.stringify(thrown));
}
