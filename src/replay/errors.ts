/** The run has no journal: it never existed, or its rows were removed. */
export class ReplayRunNotFoundError extends Error {
  override readonly name = 'ReplayRunNotFoundError';
  constructor(readonly runId: string) {
    super(`run ${runId} has no journal to replay`);
  }
}

/**
 * The run was recorded by another version of the charts than this build runs. Replaying it would
 * report divergences that are only the version change; `force` replays it anyway.
 */
export class ReplayVersionError extends Error {
  override readonly name = 'ReplayVersionError';
  constructor(
    readonly runId: string,
    readonly recorded: { machineId: string; machineVersion: number } | null,
    readonly supported: { machineId: string; machineVersion: number },
  ) {
    const found = recorded ? `machine ${recorded.machineId} version ${recorded.machineVersion}` : 'no stored snapshot (version unknown)';
    super(
      `run ${runId} was recorded with ${found}; this build replays machine ${supported.machineId} version ` +
        `${supported.machineVersion}. Replay with force (--force, ?force=true) to compare anyway.`,
    );
  }
}

/** The journal is not one a supervisor writes: seq 0 is not `run.created`, or seqs have a gap. */
export class ReplayJournalError extends Error {
  override readonly name = 'ReplayJournalError';
  constructor(
    readonly runId: string,
    readonly seq: number,
    detail: string,
  ) {
    super(`run ${runId}: journal cannot be replayed at seq ${seq}: ${detail}`);
  }
}

/** A `to` outside the journal. */
export class ReplayRangeError extends Error {
  override readonly name = 'ReplayRangeError';
  constructor(
    readonly to: number,
    readonly lastSeq: number,
  ) {
    super(`cannot stop at seq ${to}: the journal holds seq 0..${lastSeq}`);
  }
}
