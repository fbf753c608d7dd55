import { createGitHubGet, getJson, repositoryApiPath } from './github-http.ts';
import type { GitHubClientOptions, GitHubGet } from './github-http.ts';
import { isObjectId } from './types.ts';
import type { ChangedFilesOutcome, ChangedFilesSource } from './types.ts';

/** A compare answer carries every file's patch and up to 250 commits: it can be large. */
const COMPARE_BYTES = 64 * 1024 * 1024;
const PAGE_BYTES = 16 * 1024 * 1024;
/** GitHub lists at most 3,000 files of a pull request, 100 per page. */
const PULL_PAGE_SIZE = 100;
const PULL_MAX_PAGES = 30;

/**
 * Changed files through the REST API: a pull request's file list (`/pulls/{n}/files`, every page),
 * else the compare API (`/compare/{base}...{head}`), which lists at most 300 files (docs/lockfile.md#changed-files).
 * Any answer but 200 with a file list is transient.
 */
export function createGitHubChanges(options: GitHubClientOptions & { repository: string }): ChangedFilesSource {
  const get = createGitHubGet(options);
  const repo = repositoryApiPath(options.repository);
  return {
    async between({ base, head, pullRequest }) {
      if (repo === null) return { transient: `${JSON.stringify(options.repository)} is not an owner/name repository` };
      if (pullRequest !== undefined) return pullFiles(get, `${repo}/pulls/${pullRequest}/files`);
      if (!isObjectId(base) || !isObjectId(head)) return { transient: `${JSON.stringify(`${base}...${head}`)} is not a range of commit ids` };
      const path = `${repo}/compare/${base}...${head}`;
      const answer = await getJson(get, path, COMPARE_BYTES);
      if ('transient' in answer) return answer;
      const files = typeof answer.value === 'object' && answer.value !== null && 'files' in answer.value ? answer.value.files : undefined;
      return fileNames(path, files);
    },
  };
}

async function pullFiles(get: GitHubGet, path: string): Promise<ChangedFilesOutcome> {
  const names: string[] = [];
  for (let page = 1; page <= PULL_MAX_PAGES; page += 1) {
    const pagePath = `${path}?per_page=${PULL_PAGE_SIZE}&page=${page}`;
    const answer = await getJson(get, pagePath, PAGE_BYTES);
    if ('transient' in answer) return answer;
    const listed = fileNames(pagePath, answer.value);
    if ('transient' in listed) return listed;
    names.push(...listed.files);
    if (!Array.isArray(answer.value) || answer.value.length < PULL_PAGE_SIZE) break;
  }
  return { files: [...new Set(names)] };
}

/** `[{filename, previous_filename?}]` → every name, a rename under both. */
function fileNames(path: string, files: unknown): ChangedFilesOutcome {
  if (!Array.isArray(files)) return { transient: `GET ${path} answered no file list` };
  const names = new Set<string>();
  for (const file of files as unknown[]) {
    if (typeof file !== 'object' || file === null) return { transient: `GET ${path} listed a file that is not an object` };
    const { filename, previous_filename: previous } = file as { filename?: unknown; previous_filename?: unknown };
    if (typeof filename !== 'string' || filename === '') return { transient: `GET ${path} listed a file without a filename` };
    names.add(filename);
    if (typeof previous === 'string' && previous !== '') names.add(previous);
  }
  return { files: [...names] };
}
