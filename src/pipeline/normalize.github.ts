import type { EventEnvelope } from './envelope.ts';
import type { Dropped, NormalizedEvent } from './normalized-event.ts';
import type { GitHubCommon } from './normalize.schemas.ts';
import type * as payloads from './normalize.schemas.ts';
import type { z } from 'zod';

type Payload<S extends z.ZodType> = z.output<S>;
type RawBody = Record<string, unknown>;
type EnvelopeFields = Pick<
  EventEnvelope,
  'type' | 'action' | 'targetBranch' | 'sourceBranch' | 'baseBranch' | 'isForkPR'
>;
/** Where the lock file is read: `sha` null means the default branch head (docs/lockfile.md#the-event-envelope). */
interface CommitRead {
  sha: string | null;
  ref: string;
  baseSha?: string;
}

export function normalizePush(p: Payload<typeof payloads.pushPayload>, raw: RawBody): NormalizedEvent | Dropped {
  if (p.deleted === true) return { dropped: `push deleted ${p.ref}: nothing to build` };
  const at = { sha: p.after, ref: p.ref };
  const branch = withoutPrefix(p.ref, 'refs/heads/');
  if (branch !== null) return github(p, raw, { type: 'push', targetBranch: branch }, at);
  const tag = withoutPrefix(p.ref, 'refs/tags/');
  if (tag !== null) return github(p, raw, { type: 'tag', targetBranch: tag }, at);
  return { dropped: `push to ${p.ref} is neither a branch nor a tag` };
}

export function normalizePullRequest(
  p: Payload<typeof payloads.pullRequestPayload>,
  raw: RawBody,
): NormalizedEvent | Dropped {
  const { base, head } = p.pull_request;
  if (base === null || base === undefined) return { dropped: 'pull_request without a base branch' };
  const fields: EnvelopeFields = {
    type: 'pull_request',
    action: p.action,
    targetBranch: base.ref,
    sourceBranch: head.ref,
    baseBranch: base.ref,
    isForkPR: isFork(p, head.repo, base.repo),
  };
  return fromHeadRepository(github(p, raw, fields, { sha: head.sha, ref: `refs/pull/${p.number}/head`, baseSha: base.sha }), head.repo);
}

export function normalizeReview(
  type: 'review' | 'review_comment',
  p: Payload<typeof payloads.reviewPayload>,
  raw: RawBody,
): NormalizedEvent {
  const { base, head, number } = p.pull_request;
  const fields: EnvelopeFields = {
    type,
    action: p.action,
    targetBranch: base?.ref ?? defaultBranch(p),
    sourceBranch: head.ref,
    isForkPR: isFork(p, head.repo, base?.repo),
  };
  const at: CommitRead = { sha: head.sha, ref: `refs/pull/${number}/head` };
  if (base) at.baseSha = base.sha;
  return fromHeadRepository(github(p, raw, fields, at), head.repo);
}

/**
 * TRUST-4: a fork pull request's code is cloned from the head repository, where its branch is. When
 * that repository is gone the base one is kept (it still holds the commit under `refs/pull/<n>/head`).
 */
function fromHeadRepository(event: NormalizedEvent, headRepo: { clone_url?: string | null | undefined } | null | undefined): NormalizedEvent {
  const cloneUrl = headRepo?.clone_url;
  return event.envelope.isForkPR === true && typeof cloneUrl === 'string' && cloneUrl !== '' ? { ...event, cloneUrl } : event;
}

/** Events read at the default branch head: comment, dispatch, fork, star, watch, workflow_run. */
export function normalizeOnDefaultBranch(
  type: 'comment' | 'dispatch' | 'fork' | 'star' | 'watch',
  p: GitHubCommon & { action?: string },
  raw: RawBody,
): NormalizedEvent {
  const fields: EnvelopeFields = { type, targetBranch: defaultBranch(p) };
  if (type !== 'fork' && p.action !== undefined) fields.action = p.action;
  return github(p, raw, fields, defaultHead(p));
}

/**
 * A release names the tag and its `target_commitish`, which is a commit id or, more often, a branch
 * name. Only a commit id is the commit to read; for a branch the lock file is read at the default
 * branch head (the payload carries no commit id), and the tag is what the agent checks out.
 */
export function normalizeRelease(p: Payload<typeof payloads.releasePayload>, raw: RawBody): NormalizedEvent {
  const commitish = p.release.target_commitish || null;
  const sha = commitish !== null && /^([0-9a-f]{40}|[0-9a-f]{64})$/i.test(commitish) ? commitish : null;
  const branch = sha === null && commitish !== null ? commitish.replace(/^refs\/heads\//, '') : null;
  const fields: EnvelopeFields = { type: 'release', action: p.action, targetBranch: branch ?? defaultBranch(p) };
  return github(p, raw, fields, { sha, ref: `refs/tags/${p.release.tag_name}` });
}

export function normalizeRefEvent(
  type: 'create' | 'delete',
  p: Payload<typeof payloads.refPayload>,
  raw: RawBody,
): NormalizedEvent {
  return github(p, raw, { type, targetBranch: p.ref || defaultBranch(p) }, defaultHead(p));
}

export function normalizeStatus(p: Payload<typeof payloads.statusPayload>, raw: RawBody): NormalizedEvent {
  const branch = p.branches?.[0]?.name ?? defaultBranch(p);
  return github(p, raw, { type: 'status', targetBranch: branch }, { sha: p.sha, ref: `refs/heads/${branch}` });
}

export function normalizeWorkflowRun(
  p: Payload<typeof payloads.workflowRunPayload>,
  raw: RawBody,
): NormalizedEvent {
  const fields: EnvelopeFields = {
    type: 'workflow_run',
    action: p.action,
    targetBranch: p.workflow_run.head_branch || defaultBranch(p),
  };
  return github(p, raw, fields, defaultHead(p));
}

function github(p: GitHubCommon, raw: RawBody, fields: EnvelopeFields, at: CommitRead): NormalizedEvent {
  const envelope: EventEnvelope = { ...fields, payload: raw, provider: 'github', sourceRepo: p.repository.full_name };
  if (p.sender) {
    envelope.senderUsername = p.sender.login;
    envelope.senderUserId = String(p.sender.id);
  }
  const event: NormalizedEvent = {
    envelope,
    sha: at.sha,
    ref: at.ref,
    repository: p.repository.full_name,
    cloneUrl: p.repository.clone_url ?? null,
    installationId: p.installation?.id ?? null,
  };
  if (at.baseSha !== undefined) event.baseSha = at.baseSha;
  return event;
}

/** `repository.default_branch`, else `main` (docs/lockfile.md#the-event-envelope). */
function defaultBranch(p: GitHubCommon): string {
  return p.repository.default_branch ?? 'main';
}

function defaultHead(p: GitHubCommon): CommitRead {
  return { sha: null, ref: `refs/heads/${defaultBranch(p)}` };
}

/** A head repository that is gone (`null`) counts as a fork: fail closed. */
function isFork(
  p: GitHubCommon,
  head: { full_name: string } | null | undefined,
  base: { full_name: string } | null | undefined,
): boolean {
  if (!head) return true;
  return head.full_name.toLowerCase() !== (base ?? p.repository).full_name.toLowerCase();
}

function withoutPrefix(ref: string, prefix: string): string | null {
  return ref.startsWith(prefix) && ref.length > prefix.length ? ref.slice(prefix.length) : null;
}
