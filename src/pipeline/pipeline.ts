import type { Logger } from 'pino';
import type { LockFile } from '../../machines/lock.types.ts';
import type { LockFileCache } from '../lockfile/cache.ts';
import { createGitHubProvider } from '../lockfile/providers/github.ts';
import { createLocalProvider } from '../lockfile/providers/local.ts';
import { createGitHubChanges } from '../lockfile/providers/github-changes.ts';
import type { GitHubClientOptions } from '../lockfile/providers/github-http.ts';
import { createLocalChanges } from '../lockfile/providers/local-changes.ts';
import type { ChangedFilesSource, LockFileProvider } from '../lockfile/providers/types.ts';
import { resolveLockFile } from '../lockfile/resolve.ts';
import type { RepositoryRegistration } from '../db/repositories.ts';
import { parseDeliveryBody, type Delivery } from '../db/deliveries.ts';
import type { DeliveryStatus } from '../db/deliveries.ts';
import { ABSENT_COMMIT_ATTEMPTS, PermanentDeliveryError, TransientDeliveryError } from '../queue/delivery-queue.ts';
import { isObjectId } from '../lockfile/providers/types.ts';
import { withChangedFiles } from './changed-files.ts';
import { SCHEDULE_SOURCE, normalizeScheduleEvent } from './schedule-event.ts';
import { EVENT_SOURCE, normalizeEmittedEvent } from './emitted-event.ts';
import { unmatchedTriggerTypes } from './triggers.ts';
import { normalizeGenericEvent, normalizeGitHubEvent } from './normalize.ts';
import { isDropped } from './normalized-event.ts';
import type { NormalizedEvent } from './normalized-event.ts';
import type { SourceBase } from './run-source.ts';
import type { RunStarter } from './start-runs.ts';
import { createGitHubContributorResolver, resolveTrust, workflowChangesIgnored } from './trust.ts';
import type { ContributorCache, ContributorMismatch, ContributorResolver, TrustOutcome } from './trust.ts';

export interface PipelineDeps {
  repository: (name: string) => Promise<RepositoryRegistration | null>;
  /** The repository a generic source is bound to. */
  genericSourceRepository: (source: string) => Promise<string | null>;
  cache: LockFileCache;
  startRuns: RunStarter;
  log: Logger;
  /** Each lock-file resolution's outcome (`switchyard_lockfile_fetch_total{outcome}`). */
  onLockFile?: (outcome: string) => void;
  /** GitHub REST API base (`SWITCHYARD_GITHUB_API_URL`). @default 'https://api.github.com' */
  githubApiUrl?: string;
  /** Permissions of GitHub senders already read (TRUST-5); absent, each delivery reads them again. */
  contributors?: ContributorCache;
  /** A push to this repository was processed: its default branch may have moved (the schedule clock reads it again). */
  onPush?: (repository: string) => void;
}

export interface PipelineResult {
  status: DeliveryStatus;
  outcome: Record<string, unknown>;
}

/** How a GitHub registration is asked: its token, the API base. */
function githubClient(repo: RepositoryRegistration, githubApiUrl: string | undefined): GitHubClientOptions {
  return { token: repo.token ?? '', ...(githubApiUrl !== undefined && { apiUrl: githubApiUrl }) };
}

export function providerFor(repo: RepositoryRegistration, githubApiUrl: string | undefined): LockFileProvider {
  if (repo.provider === 'local') {
    return createLocalProvider({ repository: repo.name, path: repo.path ?? '', ...(repo.defaultBranch ? { defaultBranch: repo.defaultBranch } : {}) });
  }
  return createGitHubProvider({ repository: repo.name, ...githubClient(repo, githubApiUrl) });
}

function changesFor(repo: RepositoryRegistration, githubApiUrl: string | undefined): ChangedFilesSource {
  if (repo.provider === 'local') return createLocalChanges(repo.path ?? '');
  return createGitHubChanges({ repository: repo.name, ...githubClient(repo, githubApiUrl) });
}

/**
 * TRUST-2: a GitHub repository's senders are looked up with its token, so a collaborator's pull
 * request reads its own lock file and its pushes to other branches are `trusted`; the permissions
 * are kept in the pipeline's contributor cache (TRUST-5).
 */
function contributorsOf(deps: PipelineDeps, repo: RepositoryRegistration): { resolver?: ContributorResolver; cache?: ContributorCache } {
  if (repo.provider !== 'github' || !repo.token) return {};
  const onMismatch = (mismatch: ContributorMismatch) => deps.log.warn(mismatch, 'a sender login names another GitHub user; the sender is not trusted');
  const resolver = createGitHubContributorResolver({ ...githubClient(repo, deps.githubApiUrl), onMismatch });
  return { resolver, ...(deps.contributors && { cache: deps.contributors }) };
}

/** The delivery's JSON body: as the route parsed it when it was handed over at once, else parsed from the stored bytes. */
function bodyOf(delivery: Delivery): unknown {
  return 'parsedBody' in delivery ? delivery.parsedBody : parseDeliveryBody(delivery.body);
}

/** The generic envelope wrapped like a GitHub one: the lock is read at the default branch head. */
function genericEvent(delivery: Delivery, repository: string): NormalizedEvent | { dropped: string } {
  const envelope = normalizeGenericEvent(delivery.source.replace(/^generic:/, ''), delivery.eventName, bodyOf(delivery));
  if (isDropped(envelope)) return envelope;
  return { envelope, sha: null, ref: 'HEAD', repository, cloneUrl: null, installationId: null };
}

async function normalized(deps: PipelineDeps, delivery: Delivery): Promise<NormalizedEvent | { dropped: string }> {
  if (delivery.source === 'github') return normalizeGitHubEvent(delivery.eventName, bodyOf(delivery));
  if (delivery.source === SCHEDULE_SOURCE) return normalizeScheduleEvent(bodyOf(delivery));
  if (delivery.source === EVENT_SOURCE) return normalizeEmittedEvent(bodyOf(delivery));
  const repository = await deps.genericSourceRepository(delivery.source);
  if (!repository) return { dropped: `generic source ${delivery.source} has no bound repository` };
  return genericEvent(delivery, repository);
}

/**
 * One delivery, from its stored body to started runs (docs/architecture.md#one-delivery-from-webhook-to-finished-run): normalize, find
 * the registered repository, decide trust, resolve the lock file, match and start one run per
 * matched workflow. Transient failures throw TransientDeliveryError and the delivery is retried.
 */
export async function runPipeline(deps: PipelineDeps, delivery: Delivery): Promise<PipelineResult> {
  const event = await normalized(deps, delivery);
  if (isDropped(event)) return { status: 'ignored', outcome: { reason: event.dropped } };
  const repo = await deps.repository(event.repository);
  if (!repo) return { status: 'ignored', outcome: { reason: `repository ${event.repository} is not registered` } };
  delivery.trace?.mark('pipeline.repository');
  assertCommitIds(event);
  if (event.envelope.type === 'push') deps.onPush?.(repo.name);
  const provider = providerFor(repo, deps.githubApiUrl);
  const trust = await resolveTrust({
    event,
    provider: delivery.source === 'github' && repo.provider === 'github' ? 'github' : delivery.source === 'github' ? 'local' : 'generic',
    defaultBranch: repo.defaultBranch ?? 'main',
    ...contributorsOf(deps, repo),
  });
  delivery.trace?.mark('pipeline.trust');
  const lock = await resolveLockFile({ candidates: [{ provider, cloneUrl: repo.cloneUrl }], sha: trust.lockSha, cache: deps.cache });
  delivery.trace?.mark('lockfile.read');
  deps.onLockFile?.(lock.kind);
  if (lock.kind === 'transient') throw new TransientDeliveryError(`lock file: ${lock.detail}`);
  if (lock.kind === 'absent') throw new TransientDeliveryError(`lock file: ${lock.detail}`, ABSENT_COMMIT_ATTEMPTS);
  if (lock.kind === 'invalid') throw new PermanentDeliveryError(`lock file: ${lock.detail}`);
  if (lock.kind === 'miss') return { status: 'lockfile_missing', outcome: { repository: repo.name, sha: trust.lockSha } };
  const source = runSourceBase(repo, event, trust, lock.kind === 'found' ? lock.sha : (trust.lockSha ?? event.sha ?? 'HEAD'));
  if (lock.kind === 'found' && (await headChangesIgnored(deps, provider, repo, event, trust, lock.lock))) source.workflowChangesIgnored = true;
  if (lock.kind === 'corrupt') {
    const runIds = await deps.startRuns.corrupt(delivery, source, lock.error.message);
    return { status: 'lockfile_corrupt', outcome: { error: lock.error.message, runIds } };
  }
  const changes = { changes: changesFor(repo, deps.githubApiUrl), defaultBranchHead: () => provider.defaultBranchHead() };
  const envelope = await withChangedFiles(event, lock.lock.workflows, changes);
  delivery.trace?.mark('pipeline.changes');
  return startMatched(deps, delivery, lock.lock, { ...source, event: envelope });
}

/**
 * TRUST-4: a pull request whose sender may not change its workflows runs the base commit's lock
 * file; whether its head commit's workflows differ (edited, added, removed) is recorded on its runs,
 * so the author sees why their changes did not run. The head's lock file is read for such a PR only.
 * A head that cannot be read now (a fork's commit a local repository lacks, a GitHub error) leaves
 * the flag out rather than hold the runs back: it says what is known, never what is guessed.
 */
async function headChangesIgnored(deps: PipelineDeps, provider: LockFileProvider, repo: RepositoryRegistration, event: NormalizedEvent, trust: TrustOutcome, base: LockFile): Promise<boolean> {
  if (trust.lockSource !== 'base' || !event.sha) return false;
  const head = await resolveLockFile({ candidates: [{ provider, cloneUrl: repo.cloneUrl }], sha: event.sha, cache: deps.cache });
  if (head.kind === 'transient' || head.kind === 'absent') {
    deps.log.warn({ repository: repo.name, sha: event.sha, detail: head.detail }, "the pull request's head lock file cannot be read: whether its workflow changes are ignored is not recorded");
    return false;
  }
  return workflowChangesIgnored(head.kind === 'found' ? head.lock : null, base);
}

/** The event's commits reach git and agents: anything but a full object id is refused for good. */
function assertCommitIds(event: NormalizedEvent): void {
  for (const [field, sha] of [['sha', event.sha], ['base sha', event.baseSha]] as const) {
    if (sha !== null && sha !== undefined && !isObjectId(sha)) {
      throw new PermanentDeliveryError(`the event's ${field} ${JSON.stringify(sha.slice(0, 100))} is not a commit id (40 or 64 hex digits)`);
    }
  }
}

/** Lock files whose never-matching trigger types were logged; the cache hands out one object per lock file. */
const loggedUnmatched = new WeakSet<LockFile>();

async function startMatched(deps: PipelineDeps, delivery: Delivery, lock: LockFile, source: SourceBase): Promise<PipelineResult> {
  const unmatched = loggedUnmatched.has(lock) ? [] : unmatchedTriggerTypes(lock.workflows);
  loggedUnmatched.add(lock);
  if (unmatched.length > 0) deps.log.info({ repository: source.repository, sha: source.sha, types: unmatched }, 'the lock file has trigger types Switchyard never matches');
  const results = await deps.startRuns.matched(delivery, lock, lock.lockfileHash ? { ...source, lockfileHash: lock.lockfileHash } : source);
  const runIds = results.flatMap((r) => (r.runId ? [r.runId] : []));
  return { status: 'processed', outcome: { matched: results.length, runIds, workflows: results.map((r) => r.workflow) } };
}


function shortRef(ref: string): string {
  return ref.replace(/^refs\/(heads|tags)\//, '');
}

/**
 * Code is checked out at the event's commit; a fork PR clones the head repository (TRUST-4). A
 * local registration is cloned from disk, whatever URL the payload names.
 */
function runSourceBase(repo: RepositoryRegistration, event: NormalizedEvent, trust: TrustOutcome, lockSha: string): SourceBase {
  const local = repo.provider === 'local' && repo.path ? `file://${repo.path}` : null;
  const cloneUrl = repo.provider === 'local' ? (repo.cloneUrl ?? local) : (event.cloneUrl ?? repo.cloneUrl);
  const ref = event.envelope.sourceBranch ?? shortRef(event.ref === 'HEAD' ? (repo.defaultBranch ?? 'main') : event.ref);
  return {
    repository: repo.name,
    repoUrl: cloneUrl,
    ref,
    sha: event.sha ?? lockSha,
    ...(repo.defaultBranch ? { defaultBranch: repo.defaultBranch } : {}),
    provider: event.envelope.provider === 'generic' ? 'generic' : repo.provider,
    event: event.envelope,
    trustTier: trust.tier,
    lockFileSource: trust.lockSource,
  };
}
