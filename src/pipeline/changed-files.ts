import { z } from 'zod';
import type { LockWorkflow } from '../../machines/lock.types.ts';
import { isObjectId } from '../lockfile/providers/types.ts';
import type { ChangedFilesSource, DefaultBranchHead } from '../lockfile/providers/types.ts';
import { TransientDeliveryError } from '../queue/delivery-queue.ts';
import type { EventEnvelope } from './envelope.ts';
import type { NormalizedEvent } from './normalized-event.ts';
import { workflowNeedsChangedFiles } from './triggers.ts';

/** GitHub's push payload lists at most 2,048 commits; a longer push is listed by comparing commits. */
const MAX_LISTED_COMMITS = 2048;

const listedCommit = z.looseObject({
  added: z.array(z.string()).optional(),
  modified: z.array(z.string()).optional(),
  removed: z.array(z.string()).optional(),
});
const pushChanges = z.looseObject({
  before: z.string().optional(),
  created: z.boolean().optional(),
  forced: z.boolean().optional(),
  commits: z.array(listedCommit).nullish(),
});
const pullChanges = z.looseObject({ number: z.number().int().positive() });

/** Where an event's changed files come from (docs/lockfile.md#changed-files). */
export type ChangeQuery =
  /** The push payload's commits list every change. */
  | { kind: 'listed'; files: string[] }
  /** Compare `base...head`; `base` null is the default branch head (a new branch). `listed`: what the payload's commits name. */
  | { kind: 'range'; base: string | null; head: string; listed: string[] }
  | { kind: 'pull'; number: number; base: string; head: string };

/**
 * A push lists its changes in its commits unless that list may be incomplete: a new branch, a
 * forced push, no commit listed, or as many commits as GitHub lists at most. A pull request asks for
 * its file list. Null for an event without changed files (or one too malformed to tell).
 */
export function changeQueryFor(event: NormalizedEvent): ChangeQuery | null {
  const { type, payload } = event.envelope;
  if (event.sha === null) return null;
  if (type === 'pull_request') {
    const pull = pullChanges.safeParse(payload);
    if (!pull.success || event.baseSha === undefined) return null;
    return { kind: 'pull', number: pull.data.number, base: event.baseSha, head: event.sha };
  }
  if (type !== 'push') return null;
  const push = pushChanges.safeParse(payload);
  const { before, created, forced, commits } = push.success ? push.data : {};
  const listed = [...new Set((commits ?? []).flatMap((commit) => [...(commit.added ?? []), ...(commit.modified ?? []), ...(commit.removed ?? [])]))];
  const previous = before !== undefined && isObjectId(before) && !/^0+$/.test(before) ? before : null;
  const count = commits?.length ?? 0;
  if (previous !== null && created !== true && forced !== true && count > 0 && count < MAX_LISTED_COMMITS) return { kind: 'listed', files: listed };
  return { kind: 'range', base: created === true ? null : previous, head: event.sha, listed };
}

export interface ChangeSources {
  changes: ChangedFilesSource;
  defaultBranchHead(): Promise<DefaultBranchHead>;
}

/**
 * The envelope with its `changedFiles`, listed only when a workflow's trigger for this event type
 * has `paths` (docs/lockfile.md#changed-files). Files that cannot be listed are a transient failure
 * (the delivery is retried), never an empty list.
 */
export async function withChangedFiles(event: NormalizedEvent, workflows: readonly LockWorkflow[], sources: ChangeSources): Promise<EventEnvelope> {
  if (!workflows.some((workflow) => workflowNeedsChangedFiles(workflow, event.envelope.type))) return event.envelope;
  const query = changeQueryFor(event);
  if (query === null) return event.envelope;
  return { ...event.envelope, changedFiles: await listChanges(query, sources) };
}

async function listChanges(query: ChangeQuery, sources: ChangeSources): Promise<string[]> {
  if (query.kind === 'listed') return query.files;
  let base = query.base;
  if (base === null) {
    const head = await sources.defaultBranchHead();
    if ('transient' in head) throw new TransientDeliveryError(`changed files: ${head.transient}`);
    // The default branch's own first push: nothing to compare with but what its commits list.
    if (head.sha === query.head && query.kind === 'range') return query.listed;
    base = head.sha;
  }
  const pullRequest = query.kind === 'pull' ? { pullRequest: query.number } : {};
  const outcome = await sources.changes.between({ base, head: query.head, ...pullRequest });
  if ('transient' in outcome) throw new TransientDeliveryError(`changed files: ${outcome.transient}`);
  return outcome.files;
}
