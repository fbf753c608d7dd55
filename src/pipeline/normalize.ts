import type { z } from 'zod';
import { coerceError } from '../../lib/errors.ts';
import { formatJsonPath } from '../lockfile/json-path.ts';
import type { EventEnvelope } from './envelope.ts';
import type { Dropped, NormalizedEvent } from './normalized-event.ts';
import * as payloads from './normalize.schemas.ts';
import * as github from './normalize.github.ts';
import { capPayloadDepth } from './normalize.depth.ts';

type RawBody = Record<string, unknown>;
type Handler = (eventName: string, payload: unknown) => NormalizedEvent | Dropped;

function on<S extends z.ZodType>(
  schema: S,
  build: (parsed: z.output<S>, raw: RawBody) => NormalizedEvent | Dropped,
): Handler {
  return (eventName, payload) => {
    if (!isRecord(payload)) return { dropped: `malformed ${eventName}: the body is not a JSON object` };
    const parsed = schema.safeParse(payload);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const reason = issue ? `${formatJsonPath(issue.path)}: ${issue.message}` : 'invalid payload';
      return { dropped: `malformed ${eventName}: ${reason}` };
    }
    return build(parsed.data, payload);
  };
}

/** GitHub event name (`X-GitHub-Event`) → normalization (docs/lockfile.md#the-event-envelope). */
const GITHUB: ReadonlyMap<string, Handler> = new Map([
  ['push', on(payloads.pushPayload, github.normalizePush)],
  ['pull_request', on(payloads.pullRequestPayload, github.normalizePullRequest)],
  ['pull_request_review', on(payloads.reviewPayload, (p, raw) => github.normalizeReview('review', p, raw))],
  [
    'pull_request_review_comment',
    on(payloads.reviewPayload, (p, raw) => github.normalizeReview('review_comment', p, raw)),
  ],
  ['issue_comment', on(payloads.issueCommentPayload, (p, raw) => github.normalizeOnDefaultBranch('comment', p, raw))],
  ['repository_dispatch', on(payloads.actionPayload, (p, raw) => github.normalizeOnDefaultBranch('dispatch', p, raw))],
  ['release', on(payloads.releasePayload, github.normalizeRelease)],
  ['create', on(payloads.refPayload, (p, raw) => github.normalizeRefEvent('create', p, raw))],
  ['delete', on(payloads.refPayload, (p, raw) => github.normalizeRefEvent('delete', p, raw))],
  ['status', on(payloads.statusPayload, github.normalizeStatus)],
  ['workflow_run', on(payloads.workflowRunPayload, github.normalizeWorkflowRun)],
  ['fork', on(payloads.commonPayload, (p, raw) => github.normalizeOnDefaultBranch('fork', p, raw))],
  ['star', on(payloads.actionPayload, (p, raw) => github.normalizeOnDefaultBranch('star', p, raw))],
  ['watch', on(payloads.actionPayload, (p, raw) => github.normalizeOnDefaultBranch('watch', p, raw))],
]);

/**
 * Maps a GitHub delivery to an envelope and the commit its lock file is read at (docs/lockfile.md#the-event-envelope),
 * or says why it is dropped (`ping`, unknown events, deleted refs, malformed payloads). Parts nested
 * deeper than MAX_PAYLOAD_DEPTH are replaced by a marker (normalize.depth.ts). Never throws.
 */
export function normalizeGitHubEvent(eventName: string, payload: unknown): NormalizedEvent | Dropped {
  const handler = GITHUB.get(eventName);
  if (handler === undefined) return { dropped: `ignored GitHub event ${JSON.stringify(eventName)}` };
  try {
    return handler(eventName, capPayloadDepth(payload));
  } catch (thrown) {
    return { dropped: `malformed ${eventName}: ${coerceError(thrown).message}` };
  }
}

/**
 * `POST /webhooks/generic/:source` (docs/lockfile.md#the-event-envelope): `eventType` comes from the source's event-type
 * header; `"default"` (or none) leaves `action` unset. The body must be a JSON object; its parts
 * nested too deeply are cut as for GitHub.
 */
export function normalizeGenericEvent(source: string, eventType: string, raw: unknown): EventEnvelope | Dropped {
  const payload = capPayloadDepth(raw);
  if (!isRecord(payload)) return { dropped: 'malformed generic webhook: the body is not a JSON object' };
  const envelope: EventEnvelope = {
    type: 'generic_webhook',
    targetBranch: '__generic__',
    payload: { ...payload, source, eventType },
    provider: 'generic',
  };
  if (eventType !== 'default' && eventType !== '') envelope.action = eventType;
  return envelope;
}

function isRecord(value: unknown): value is RawBody {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
