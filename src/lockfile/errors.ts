/** Which rule of docs/lockfile.md#what-counts-as-corrupt a corrupt lock file breaks. */
export type LockCorruptRule =
  | 'file'
  | 'schema_version'
  | 'structure'
  | 'label_matcher'
  | 'regex'
  | 'graph'
  | 'expression'
  | 'run_step';

/**
 * The lock file is corrupt (docs/lockfile.md#what-counts-as-corrupt). Nothing is dispatched: the delivery becomes
 * `lockfile_corrupt` and one failed run carries this message as its `lock_resolution` init failure.
 */
export class LockFileParseError extends Error {
  override readonly name = 'LockFileParseError';

  constructor(
    /** JSON path of the first problem, e.g. `$.workflows[0].jobs[2].runsOn[0]`. */
    readonly path: string,
    readonly problem: string,
    readonly rule: LockCorruptRule,
  ) {
    super(`lock file is corrupt at ${path}: ${problem}`);
  }
}

/** The first problem found, before it becomes a {@link LockFileParseError}. */
export interface LockProblem {
  path: readonly PropertyKey[];
  problem: string;
  rule: LockCorruptRule;
}
