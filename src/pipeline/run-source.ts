import { Batcher } from '../../lib/batcher.ts';
import type { LockWorkflow } from '../../machines/lock.types.ts';
import type { EventEnvelope } from './envelope.ts';
import type { RunEnvironments } from './environments.ts';

/**
 * What a run's dispatches are built from, frozen when the run is created (RUN-3) and stored as
 * the run's input summary. Never holds secrets: credentials are resolved at dispatch time.
 */
export interface RunSource {
  repository: string;
  /** Clone URL (`file://` for local repositories); `null` runs jobs without a checkout. */
  repoUrl: string | null;
  /** Empty for a run started by hand for no branch or commit (agents are sent `HEAD`). */
  ref: string;
  sha: string;
  /** Who started a run by hand (`POST /api/v1/runs`). */
  startedBy?: string;
  /** The repository's default branch, whose user cache entries every run may restore; absent in runs made before it was kept: `main`. */
  defaultBranch?: string;
  provider: 'github' | 'local' | 'generic' | 'api';
  event: EventEnvelope | null;
  workflow: LockWorkflow;
  /** The lock file's hash of the workflows' dependency lock file: the key of their dependency tarball. */
  lockfileHash?: string;
  trustTier?: 'trusted' | 'known' | 'unknown';
  /** The commit the lock file was read at (TRUST-4): the event's, a pull request's head, or its base. */
  lockFileSource?: 'head' | 'base' | 'event';
  /** A pull request run from its base's lock file whose head changes the workflows (TRUST-4); absent otherwise. */
  workflowChangesIgnored?: true;
  /** Results of inline `env` expressions by job name, evaluated once at run creation (EVAL-1). */
  resolvedEnv?: Record<string, Record<string, string>>;
  /** Environments frozen at creation (ENV-4): the one each job names and their variables. */
  environments?: RunEnvironments;
  /** The delivery that started the run, when a webhook did. */
  delivery?: { source: string; deliveryId: string };
  /** What the workflow asks for that Switchyard does not do, one line each (src/lockfile/unsupported.ts); absent: nothing. */
  unsupported?: string[];
  /** A test run that brought an encrypted secrets blob (kept apart, decrypted at dispatch; docs/http-api.md#test-runs). */
  testRunSecrets?: true;
}

/** What every run of one delivery shares, before a workflow is chosen. */
export interface SourceBase {
  repository: string;
  repoUrl: string | null;
  ref: string;
  sha: string;
  provider: 'github' | 'local' | 'generic';
  event: EventEnvelope;
  trustTier: NonNullable<RunSource['trustTier']>;
  lockFileSource: NonNullable<RunSource['lockFileSource']>;
  workflowChangesIgnored?: true;
  defaultBranch?: string;
  lockfileHash?: string;
}

/** A fork pull request's run, or one whose sender is unknown: it reads trusted caches and writes only untrusted ones. */
export function isUntrustedRun(source: Pick<RunSource, 'event' | 'trustTier'>): boolean {
  return source.event?.isForkPR === true || source.trustTier === 'unknown';
}

export function isRunSource(value: unknown): value is RunSource {
  return typeof value === 'object' && value !== null && 'workflow' in value && 'repository' in value && 'ref' in value;
}

const REMEMBERED_RUNS = 1000;
/** Runs whose sources one query reads at most. */
const READ_BATCH = 200;

/**
 * The sources of recent runs, by run id: remembered when a run is created here, read from the
 * run's row once after a restore or adoption, or once forgotten (only the last REMEMBERED_RUNS are
 * kept: a source holds the workflow and the event). A dispatch is built from it with no query when
 * it is remembered. The sources read while one query is in flight are read together by the next,
 * and a run asked for again while its source is being read waits for that read: a backlog of
 * thousands of runs reaching agents costs a few queries, not one per dispatch.
 */
export class RunSources {
  private readonly sources = new Map<string, RunSource>();
  private readonly reading = new Map<string, Promise<RunSource | null>>();
  private readonly reader: Batcher<string, unknown>;

  /** `load` reads the stored sources of the given runs; a run it does not find is absent from its answer. */
  constructor(load: (runIds: string[]) => Promise<Map<string, unknown>>) {
    this.reader = new Batcher<string, unknown>(async (runIds) => {
      const stored = await load(runIds);
      return runIds.map((runId) => stored.get(runId) ?? null);
    }, READ_BATCH);
  }

  remember(runId: string, source: unknown): void {
    if (!isRunSource(source)) return;
    if (this.sources.size >= REMEMBERED_RUNS) this.sources.delete(this.sources.keys().next().value as string);
    this.sources.set(runId, source);
  }

  of(runId: string): Promise<RunSource | null> {
    const known = this.sources.get(runId);
    if (known) return Promise.resolve(known);
    const pending = this.reading.get(runId);
    if (pending) return pending;
    const read = this.reader.add(runId).then((stored) => {
      this.remember(runId, stored);
      return isRunSource(stored) ? stored : null;
    });
    this.reading.set(runId, read);
    const done = () => this.reading.delete(runId);
    read.then(done, done);
    return read;
  }
}
