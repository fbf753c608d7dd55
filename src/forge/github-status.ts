import type { Logger } from 'pino';
import type { Effect } from '../../actors/runs/ports.ts';
import { coerceError } from '../../lib/errors.ts';
import type { RepositoryRegistration } from '../db/repositories.ts';
import { encodePath, splitRepository } from '../lockfile/providers/github-http.ts';
import type { RunSource } from '../pipeline/run-source.ts';

export interface GitHubStatusDeps {
  /** The run's frozen source: repository and commit. */
  sourceOf: (runId: string) => Promise<RunSource | null>;
  /** The repository's registration: its provider and token. */
  repository: (name: string) => Promise<RepositoryRegistration | null>;
  /** GitHub REST API base, no trailing slash (`SWITCHYARD_GITHUB_API_URL`). */
  apiUrl: string;
  /** The run on this coordinator's runs page (`target_url`). */
  runLink: (runId: string) => string;
  log: Logger;
  /** Per request. @default 10_000 */
  timeoutMs?: number;
  /** @default globalThis.fetch */
  fetchImpl?: typeof fetch;
}

const TIMEOUT_MS = 10_000;
const COMMIT_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i;

/** A status GitHub refused for good: retrying the same request cannot succeed (docs/http-api.md#commit-status-on-github). */
function refusedForGood(response: Response): boolean {
  if (response.status < 400 || response.status >= 500) return false;
  if (response.status === 408 || response.status === 429) return false;
  // A rate limit answers 403 with no requests left: it passes.
  return !(response.status === 403 && response.headers.get('x-ratelimit-remaining') === '0');
}

/**
 * The `reportForgeStatus` effect: `POST /repos/{owner}/{repo}/statuses/{sha}` with the repository's
 * token. A run whose repository is not a registered GitHub repository with a token, or whose sha is
 * no commit id, reports nothing. A network failure, a timeout or a 5xx throws, so the effect
 * executor retries it with backoff; a 4xx that cannot succeed (401, 404, 422…) is logged and given up.
 * Commit statuses are idempotent per context and state; the key `runId:state` travels as
 * `X-Switchyard-Idempotency-Key` for the forge's logs.
 */
export function createGitHubStatusReporter(deps: GitHubStatusDeps) {
  const fetchImpl = deps.fetchImpl ?? fetch;
  const timeoutMs = deps.timeoutMs ?? TIMEOUT_MS;
  const ended = new EndedRuns();
  return async (effect: Effect<'reportForgeStatus'>): Promise<void> => {
    const log = deps.log.child({ runId: effect.runId, effectId: effect.effectId, context: effect.payload.context, state: effect.payload.state });
    // A pending status re-driven after the final one went out would hide the result: it is dropped.
    if (effect.payload.state === 'pending' && ended.has(effect.runId)) {
      log.info('pending status dropped: the final status was already reported');
      return;
    }
    await post(effect, log);
    if (effect.payload.state !== 'pending') ended.add(effect.runId);
  };

  async function post(effect: Effect<'reportForgeStatus'>, log: Logger): Promise<void> {
    const target = await targetOf(deps, effect.runId);
    if ('skip' in target) {
      log.debug({ reason: target.skip }, 'no commit status reported');
      return;
    }
    const { owner, name } = target.repository;
    const path = `/repos/${encodePath(owner)}/${encodePath(name)}/statuses/${target.sha}`;
    const { context, state, description } = effect.payload;
    const body = JSON.stringify({ state, context, description, target_url: deps.runLink(effect.runId) });
    let response: Response;
    try {
      response = await fetchImpl(`${deps.apiUrl}${path}`, {
        method: 'POST',
        headers: {
          accept: 'application/vnd.github+json',
          authorization: `Bearer ${target.token}`,
          'content-type': 'application/json',
          'user-agent': 'switchyard',
          'x-github-api-version': '2022-11-28',
          'x-switchyard-idempotency-key': `${effect.runId}:${state}`,
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (thrown) {
      throw new Error(`POST ${path} failed: ${coerceError(thrown).message}`, { cause: thrown });
    }
    const text = (await response.text().catch(() => '')).slice(0, 300);
    if (response.ok) return;
    if (refusedForGood(response)) {
      log.error({ status: response.status, answer: text }, 'GitHub refused the commit status; it is given up (check the repository token and its repo:status permission)');
      return;
    }
    throw new Error(`POST ${path} answered HTTP ${response.status}: ${text}`);
  }
}

const REMEMBERED_ENDED_RUNS = 10_000;

/** Runs whose final status this process reported, the oldest forgotten first. */
class EndedRuns {
  private readonly runs = new Set<string>();

  has(runId: string): boolean {
    return this.runs.has(runId);
  }

  add(runId: string): void {
    if (this.runs.size >= REMEMBERED_ENDED_RUNS) this.runs.delete(this.runs.values().next().value as string);
    this.runs.add(runId);
  }
}

type Target = { repository: { owner: string; name: string }; sha: string; token: string } | { skip: string };

async function targetOf(deps: GitHubStatusDeps, runId: string): Promise<Target> {
  const source = await deps.sourceOf(runId);
  if (!source) return { skip: 'the run has no stored source' };
  const registration = await deps.repository(source.repository);
  if (registration?.provider !== 'github') return { skip: `${source.repository} is not a registered GitHub repository` };
  if (!registration.token) return { skip: `${source.repository} has no token` };
  const repository = splitRepository(source.repository);
  if (!repository) return { skip: `${source.repository} is not owner/name` };
  if (!COMMIT_SHA.test(source.sha)) return { skip: `${source.sha} is not a commit id` };
  return { repository, sha: source.sha.toLowerCase(), token: registration.token };
}

/** `<base>/runs/#run=<id>`: the runs page opens the run named in its fragment. */
export function runPageLink(baseUrl: string, runId: string): string {
  return `${baseUrl}/runs/#run=${encodeURIComponent(runId)}`;
}
