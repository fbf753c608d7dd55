import type { LockFile } from '../../machines/lock.types.ts';
import { coerceError } from '../../lib/errors.ts';
import { TtlLru } from '../lockfile/cache.ts';
import { createGitHubGet, getJson, splitRepository } from '../lockfile/providers/github-http.ts';
import type { GitHubClientOptions, GitHubGet } from '../lockfile/providers/github-http.ts';
import type { EventType } from './envelope.ts';
import type { NormalizedEvent } from './normalized-event.ts';

export type TrustTier = 'trusted' | 'known' | 'unknown';
export type Permission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none';
export type TrustProvider = 'github' | 'local' | 'generic';

/** The provider permission of a user on a repository (TRUST-2). Throws when it cannot tell. */
export interface ContributorResolver {
  permissionOf(args: { repository: string; userId: string; login?: string }): Promise<Permission>;
}

export interface TrustOutcome {
  tier: TrustTier;
  /** The commit to read the lock file at; null = the default branch head. */
  lockSha: string | null;
  lockSource: 'head' | 'base' | 'event';
  reason: string;
}

/** A contributor lookup failed; the tier falls to `unknown` (TRUST-3). */
export class ContributorLookupError extends Error {
  override readonly name = 'ContributorLookupError';
  constructor(
    readonly repository: string,
    readonly userId: string,
    detail: string,
  ) {
    super(`cannot read the permission of user ${userId} on ${repository}: ${detail}`);
  }
}

const PERMISSIONS: readonly Permission[] = ['admin', 'maintain', 'write', 'triage', 'read', 'none'];

const TIER_OF: Readonly<Record<Permission, TrustTier>> = {
  admin: 'trusted',
  maintain: 'trusted',
  write: 'trusted',
  triage: 'known',
  read: 'known',
  none: 'unknown',
};

/** TRUST-5: build caches may be shared only between trusted refs. */
export function cacheRefScopeOf(tier: TrustTier): 'shared' | 'isolated' {
  return tier === 'trusted' ? 'shared' : 'isolated';
}

export interface ContributorMismatch {
  repository: string;
  userId: string;
  login: string;
  /** The id GitHub reports for `login`; null when it reports none. */
  actualUserId: string | null;
}

export interface GitHubContributorResolverOptions extends GitHubClientOptions {
  /** Called for every login/id mismatch (counted by the caller's metrics). */
  onMismatch?: (mismatch: ContributorMismatch) => void;
}

const BODY_BYTES = 1024 * 1024;

/**
 * Reads `GET /repos/{o}/{n}/collaborators/{login}/permission` and accepts the answer only when its
 * `user.id` is the sender's numeric id: a login that now names someone else gives `none` (TRUST-2).
 * Without a login, the login is read from `GET /user/{id}` first.
 */
export function createGitHubContributorResolver(options: GitHubContributorResolverOptions): ContributorResolver {
  const get = createGitHubGet(options);
  return {
    async permissionOf({ repository, userId, login }) {
      const fail = (detail: string) => new ContributorLookupError(repository, userId, detail);
      const repo = splitRepository(repository);
      if (repo === null) throw fail('not an owner/name repository');
      if (!/^[1-9]\d*$/.test(userId)) throw fail('the user id is not numeric');
      const name = login ?? (await loginOf(get, userId, fail));
      const path = `/repos/${repo.owner}/${repo.name}/collaborators/${encodeURIComponent(name)}/permission`;
      const body = await answerOf(get, path, fail);
      const actualUserId = idOf(field(body, 'user'));
      if (actualUserId !== userId) {
        options.onMismatch?.({ repository, userId, login: name, actualUserId });
        return 'none';
      }
      const permission = permissionFrom(body);
      if (permission === null) throw fail(`GET ${path} named no known permission`);
      return permission;
    },
  };
}

async function loginOf(get: GitHubGet, userId: string, fail: (detail: string) => Error): Promise<string> {
  const body = await answerOf(get, `/user/${userId}`, fail);
  const login = field(body, 'login');
  if (typeof login !== 'string' || login === '' || idOf(body) !== userId) {
    throw fail(`GET /user/${userId} did not name that user`);
  }
  return login;
}

/** The 200 JSON answer, or the lookup's failure with why there is none. */
async function answerOf(get: GitHubGet, path: string, fail: (detail: string) => Error): Promise<unknown> {
  const answer = await getJson(get, path, BODY_BYTES);
  if ('transient' in answer) throw fail(answer.transient);
  return answer.value;
}

/** `role_name` carries maintain and triage; custom roles fall back to the base `permission`. */
function permissionFrom(body: unknown): Permission | null {
  for (const key of ['role_name', 'permission']) {
    const value = field(body, key);
    const known = PERMISSIONS.find((permission) => permission === value);
    if (known !== undefined) return known;
  }
  return null;
}

function field(value: unknown, key: string): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return (value as Record<string, unknown>)[key];
}

function idOf(user: unknown): string | null {
  const id = field(user, 'id');
  return typeof id === 'number' || typeof id === 'string' ? String(id) : null;
}

export interface ContributorCacheOptions {
  /** @default 10_000 */
  maxEntries?: number;
  /** @default 900_000 (15 min) */
  ttlMs?: number;
  /** @default Date.now */
  now?: () => number;
}

export interface ContributorKey {
  provider: string;
  repository: string;
  userId: string;
  login?: string;
}

/**
 * Permissions by `provider:repository:userId` (TRUST-5). An entry stored under another login is not
 * used, so a renamed account or an earlier login/id mismatch is looked up again.
 */
export class ContributorCache {
  readonly #lru: TtlLru<{ repository: string; login: string | undefined; permission: Permission }>;

  constructor(options: ContributorCacheOptions = {}) {
    this.#lru = new TtlLru({
      maxEntries: options.maxEntries ?? 10_000,
      ttlMs: options.ttlMs ?? 15 * 60 * 1000,
      now: options.now ?? Date.now,
    });
  }

  static key({ provider, repository, userId }: ContributorKey): string {
    return `${provider}:${repository}:${userId}`;
  }

  get hits(): number {
    return this.#lru.hits;
  }

  get misses(): number {
    return this.#lru.misses;
  }

  get size(): number {
    return this.#lru.size;
  }

  get(key: ContributorKey): Permission | undefined {
    const sameLogin = (entry: { login: string | undefined }) =>
      key.login === undefined || entry.login === undefined || entry.login === key.login;
    return this.#lru.get(ContributorCache.key(key), sameLogin)?.permission;
  }

  set(key: ContributorKey, permission: Permission): void {
    this.#lru.set(ContributorCache.key(key), { repository: key.repository, login: key.login, permission });
  }

  /** For `member` and `team` events: every cached permission on that repository. Returns the count removed. */
  invalidate(repository: string): number {
    const target = repository.toLowerCase();
    return this.#lru.deleteWhere((entry) => entry.repository.toLowerCase() === target);
  }

  /** For `organization` and `membership` events, which name an owner but no repository. */
  invalidateOwner(owner: string): number {
    const prefix = `${owner.toLowerCase()}/`;
    return this.#lru.deleteWhere((entry) => entry.repository.toLowerCase().startsWith(prefix));
  }

  clear(): void {
    this.#lru.clear();
  }
}

export interface ResolveTrustInput {
  event: NormalizedEvent;
  provider: TrustProvider;
  defaultBranch: string;
  /** Absent: nobody vouches for a sender, so PRs and GitHub events other than default-branch pushes are `unknown`. */
  resolver?: ContributorResolver;
  cache?: ContributorCache;
}

/** Events that build a pull request's head commit. */
const PULL_REQUEST_TYPES: ReadonlySet<EventType> = new Set(['pull_request', 'review', 'review_comment']);

/**
 * TRUST-1..4. Pull requests: a fork is `unknown`; otherwise the sender's permission, looked up by
 * numeric id, gives the tier, and only a `trusted` PR reads its lock file at the head commit.
 * Other events read at the event commit. Fails closed: any error is `unknown`; never throws.
 */
export async function resolveTrust(input: ResolveTrustInput): Promise<TrustOutcome> {
  const pullRequest = PULL_REQUEST_TYPES.has(input.event.envelope.type);
  try {
    return pullRequest ? await pullRequestTrust(input) : await eventTrust(input);
  } catch (thrown) {
    const reason = `trust resolution failed: ${coerceError(thrown).message}`;
    return pullRequest ? baseRead(input.event, 'unknown', reason) : eventRead(input.event, 'unknown', reason);
  }
}

async function pullRequestTrust(input: ResolveTrustInput): Promise<TrustOutcome> {
  const { event } = input;
  if (event.envelope.isForkPR === true) return baseRead(event, 'unknown', 'pull request from a fork');
  if (event.envelope.isForkPR !== false) {
    return baseRead(event, 'unknown', 'the event does not say whether the pull request comes from a fork');
  }
  const sender = await senderTier(input);
  if (sender.tier !== 'trusted') return baseRead(event, sender.tier, sender.reason);
  return { tier: 'trusted', lockSha: event.sha, lockSource: 'head', reason: sender.reason };
}

async function eventTrust(input: ResolveTrustInput): Promise<TrustOutcome> {
  const { event, provider, defaultBranch } = input;
  const { type, targetBranch } = event.envelope;
  if (type === 'push' && targetBranch === defaultBranch) {
    return eventRead(event, 'trusted', `push to the default branch ${defaultBranch}`);
  }
  if (type === 'schedule') return eventRead(event, 'trusted', 'schedule of a lock file Switchyard already read');
  if (type === 'kici_event') {
    const tier = emitterTierOf(event.envelope.payload);
    return eventRead(event, tier, `event emitted by run ${String(event.envelope.payload['sourceRunId'])} (${tier}), which it inherits`);
  }
  if (provider !== 'github') {
    const reason = `${type} event from the ${provider} provider, which has no contributor resolver`;
    return eventRead(event, 'trusted', reason);
  }
  const sender = await senderTier(input);
  return eventRead(event, sender.tier, sender.reason);
}

async function senderTier(input: ResolveTrustInput): Promise<{ tier: TrustTier; reason: string }> {
  const { event, provider, resolver, cache } = input;
  const userId = event.envelope.senderUserId;
  if (userId === undefined || userId === '') return { tier: 'unknown', reason: 'the event names no sender id' };
  if (resolver === undefined) {
    return { tier: 'unknown', reason: `no contributor resolver for the ${provider} provider` };
  }
  const key: ContributorKey = { provider, repository: event.repository, userId };
  if (event.envelope.senderUsername !== undefined) key.login = event.envelope.senderUsername;
  let permission: Permission | undefined = cache?.get(key);
  try {
    if (permission === undefined) {
      permission = await resolver.permissionOf({ repository: key.repository, userId, ...loginOfKey(key) });
      cache?.set(key, permission);
    }
  } catch (thrown) {
    const reason = `contributor lookup failed, so the sender is unknown: ${coerceError(thrown).message}`;
    return { tier: 'unknown', reason };
  }
  const tier: TrustTier = TIER_OF[permission] ?? 'unknown';
  return { tier, reason: `sender ${userId} has ${permission} permission on ${event.repository}` };
}

function loginOfKey(key: ContributorKey): { login?: string } {
  return key.login === undefined ? {} : { login: key.login };
}

function baseRead(event: NormalizedEvent, tier: TrustTier, reason: string): TrustOutcome {
  // Without a base commit the default branch head is read: never the head of an untrusted PR.
  return { tier, lockSha: event.baseSha ?? null, lockSource: 'base', reason };
}

/** The tier an emitted event's envelope carries (set by the coordinator from the sending run, never by the workflow's payload; docs/events.md). */
function emitterTierOf(payload: Record<string, unknown>): TrustTier {
  const tier = payload['trustTier'];
  return tier === 'trusted' || tier === 'known' ? tier : 'unknown';
}

function eventRead(event: NormalizedEvent, tier: TrustTier, reason: string): TrustOutcome {
  return { tier, lockSha: event.sha, lockSource: 'event', reason };
}

/**
 * TRUST-4: whether an untrusted PR's own lock file differs from the base one it was denied. Compares
 * `{schemaVersion, source, workflows}` (what `contentHash` covers), not the hash itself, which nobody
 * verifies. A lock file present on one side only differs.
 */
export function workflowChangesIgnored(headLock: LockFile | null, baseLock: LockFile | null): boolean {
  if (headLock === null || baseLock === null) return headLock !== baseLock;
  return canonicalContent(headLock) !== canonicalContent(baseLock);
}

function canonicalContent(lock: LockFile): string {
  return canonicalJson({ schemaVersion: lock.schemaVersion, source: lock.source, workflows: lock.workflows });
}

/** JSON with object keys sorted, so key order never makes two lock files differ. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
