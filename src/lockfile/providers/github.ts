import { MAX_LOCK_FILE_BYTES } from '../parse.ts';
import { createGitHubGet, encodePath, getJson, parseJson, repositoryApiPath, statusDetail, githubMessage } from './github-http.ts';
import type { GitHubClientOptions, GitHubGet, GitHubResponse } from './github-http.ts';
import { outcomeOf, oversizeOutcome } from './outcome.ts';
import { LOCK_FILE_PATH, isCommitSha } from './types.ts';
import type { DefaultBranchHead, LockFetchOutcome, LockFileProvider } from './types.ts';

export interface GitHubProviderOptions extends GitHubClientOptions {
  /** `owner/name`. */
  repository: string;
}

const RAW = 'application/vnd.github.raw+json';
/** Small JSON answers (repository, commit, errors). */
const METADATA_BYTES = 1024 * 1024;

/**
 * Reads the lock file through the Contents API at a commit (LOCK-1). 404 is a miss, unless GitHub
 * says the commit itself is unknown (not replicated yet: `absent`, retried a few times); 5xx, 429,
 * 401/403, network errors and timeouts are transient (LOCK-2); a malformed commit id is `invalid`.
 */
export function createGitHubProvider(options: GitHubProviderOptions): LockFileProvider {
  const get = createGitHubGet(options);
  const base = repositoryApiPath(options.repository);
  const invalid = `${JSON.stringify(options.repository)} is not an owner/name repository`;
  return {
    name: `github:${options.repository}`,
    async fetch({ sha }) {
      if (base === null) return { kind: 'invalid', detail: invalid };
      if (sha !== null && !isCommitSha(sha)) {
        return { kind: 'invalid', detail: `${JSON.stringify(sha)} is not a commit id (7 to 64 hex digits)` };
      }
      const path = `${base}/contents/${LOCK_FILE_PATH}${sha === null ? '' : `?ref=${sha}`}`;
      const result = await get(path, { accept: RAW, maxBytes: MAX_LOCK_FILE_BYTES });
      if (!result.ok) return { kind: 'transient', detail: result.detail };
      return contentsOutcome(path, result.response);
    },
    defaultBranchHead: () => (base === null ? Promise.resolve({ transient: invalid }) : defaultBranchHead(get, base)),
  };
}

function contentsOutcome(path: string, response: GitHubResponse): LockFetchOutcome {
  if (response.status === 404) {
    const message = githubMessage(response) ?? 'Not Found';
    // The Contents API answers 404 for an unknown ref too; an unknown commit is never a miss.
    if (/no commit found/i.test(message)) return { kind: 'absent', detail: statusDetail(path, response) };
    return { kind: 'miss', detail: `no ${LOCK_FILE_PATH} (${message})` };
  }
  if (response.status !== 200) return { kind: 'transient', detail: statusDetail(path, response) };
  if (response.truncated) return oversizeOutcome(null);
  return fileContents(response) ?? outcomeOf(response.body);
}

/**
 * When the raw media type is not honoured the answer is the JSON description of the file with its
 * `content` in base64. Returns null for a raw answer.
 */
function fileContents(response: GitHubResponse): LockFetchOutcome | null {
  if (!response.contentType.startsWith('application/json')) return null;
  const value = parseJson(response.body);
  if (typeof value !== 'object' || value === null || !('type' in value) || value.type !== 'file') return null;
  if (!('encoding' in value) || !('content' in value) || typeof value.content !== 'string') return null;
  const size = 'size' in value && typeof value.size === 'number' ? value.size : null;
  if (size !== null && size > MAX_LOCK_FILE_BYTES) return oversizeOutcome(size);
  if (value.encoding !== 'base64') {
    const detail = `the Contents API did not inline ${LOCK_FILE_PATH} (encoding ${String(value.encoding)})`;
    return { kind: 'transient', detail };
  }
  return outcomeOf(Buffer.from(value.content, 'base64'));
}

async function defaultBranchHead(get: GitHubGet, base: string): Promise<DefaultBranchHead> {
  const repository = await getJson(get, base, METADATA_BYTES);
  if ('transient' in repository) return repository;
  const branch = stringField(repository.value, 'default_branch');
  if (branch === null) return { transient: `GET ${base} has no default_branch` };
  const commitPath = `${base}/commits/${encodePath(branch)}`;
  const commit = await getJson(get, commitPath, METADATA_BYTES);
  if ('transient' in commit) return commit;
  const sha = stringField(commit.value, 'sha');
  if (sha === null || !isCommitSha(sha)) return { transient: `GET ${commitPath} has no commit sha` };
  return { sha, branch };
}

function stringField(value: unknown, key: string): string | null {
  if (typeof value !== 'object' || value === null || !(key in value)) return null;
  const field: unknown = (value as Record<string, unknown>)[key];
  return typeof field === 'string' && field !== '' ? field : null;
}
