import { coerceError } from '../../../lib/errors.ts';
import { MAX_LOCK_FILE_BYTES } from '../parse.ts';
import { objectReaderFor, type GitObjectReader } from './git-batch.ts';
import { gitIn, localPathProblem, type Git } from './local-git.ts';
import { notAFileOutcome, outcomeOf, oversizeOutcome } from './outcome.ts';
import { LOCK_FILE_PATH, isObjectId } from './types.ts';
import type { DefaultBranchHead, LockFetchOutcome, LockFileProvider } from './types.ts';

export interface LocalProviderOptions {
  /** Repository `full_name` the mirror holds, e.g. `acme/app`. */
  repository: string;
  /** A git repository on disk, bare or with a work tree. */
  path: string;
  /** @default the branch `HEAD` points at, else `main` */
  defaultBranch?: string;
}

/**
 * Reads `.kici/kici.lock.json` at a commit of a git repository on disk (LOCK-1), with `git` and no
 * shell; only full object ids reach git, and every path comes after `--`.
 */
export function createLocalProvider(options: LocalProviderOptions): LockFileProvider {
  const git = gitIn(options.path);
  const reader = objectReaderFor(options.path, MAX_LOCK_FILE_BYTES);
  const badPath = localPathProblem(options.path);
  const provider: LockFileProvider = {
    name: `local:${options.repository}`,
    async fetch({ sha }) {
      if (badPath !== null) return { kind: 'invalid', detail: `the registered path of ${options.repository} ${badPath}` };
      try {
        if (sha !== null) return await readAt(git, reader, options.path, sha);
        const head = await provider.defaultBranchHead();
        if ('transient' in head) return { kind: 'transient', detail: head.transient };
        return await readAt(git, reader, options.path, head.sha);
      } catch (thrown) {
        return { kind: 'transient', detail: `reading ${options.path}: ${coerceError(thrown).message}` };
      }
    },
    defaultBranchHead: () => defaultBranchHead(git, options),
  };
  return provider;
}

/**
 * The commit and the lock file are asked of the repository's running `git cat-file --batch` in one
 * write; anything but a plain answer (no lock file, a failed reader) is read again with one process
 * per question, which tells every case apart.
 */
async function readAt(git: Git, reader: GitObjectReader, path: string, sha: string): Promise<LockFetchOutcome> {
  if (!isObjectId(sha)) {
    return { kind: 'invalid', detail: `${JSON.stringify(sha)} is not a commit id (40 or 64 hex digits)` };
  }
  const [commit, lock] = await Promise.all([reader.read(`${sha}^{commit}`), reader.read(`${sha}:${LOCK_FILE_PATH}`)]);
  if (commit.kind !== 'object' || lock.kind !== 'object') return readWithProcesses(git, path, sha);
  if (lock.type !== 'blob') return notAFileOutcome(`${LOCK_FILE_PATH} is a ${lock.type}, not a file`);
  if (lock.content === null || lock.size > MAX_LOCK_FILE_BYTES) return oversizeOutcome(lock.size);
  return outcomeOf(lock.content);
}

async function readWithProcesses(git: Git, path: string, sha: string): Promise<LockFetchOutcome> {
  const present = await git(['cat-file', '-e', '--end-of-options', `${sha}^{commit}`]);
  if (!present.ok) return absentOrUnreadable(git, path, sha);
  // ls-tree tells "absent" from "unreadable" by exit status, without parsing git's messages.
  const listed = await git(['ls-tree', '-l', '--full-tree', '--end-of-options', sha, '--', LOCK_FILE_PATH]);
  if (!listed.ok) {
    return { kind: 'transient', detail: `listing ${LOCK_FILE_PATH} at ${sha} in ${path}: ${listed.detail}` };
  }
  const entry = parseTreeEntry(listed.stdout.toString('utf8'));
  if (entry === null) return { kind: 'miss', detail: `no ${LOCK_FILE_PATH} at ${sha} in ${path}` };
  if (entry.size === null) return notAFileOutcome(`${LOCK_FILE_PATH} is a ${entry.type}, not a file`);
  if (entry.size > MAX_LOCK_FILE_BYTES) return oversizeOutcome(entry.size);
  if (!isObjectId(entry.oid)) return { kind: 'transient', detail: `unexpected object id ${JSON.stringify(entry.oid)} from git ls-tree` };
  const blob = await git(['cat-file', 'blob', '--end-of-options', entry.oid], MAX_LOCK_FILE_BYTES + 1);
  if (!blob.ok) return { kind: 'transient', detail: `reading ${LOCK_FILE_PATH} at ${sha} in ${path}: ${blob.detail}` };
  return outcomeOf(blob.stdout);
}

/** A repository that cannot be read at all is transient (a volume not mounted yet), not an absent commit. */
async function absentOrUnreadable(git: Git, path: string, sha: string): Promise<LockFetchOutcome> {
  const repository = await git(['rev-parse', '--git-dir']);
  if (!repository.ok) return { kind: 'transient', detail: `${path} is not a readable git repository: ${repository.detail}` };
  return { kind: 'absent', detail: `commit ${sha} is not present in ${path}` };
}

interface TreeEntry {
  type: string;
  oid: string;
  /** Null for anything that is not a blob (a directory or a submodule). */
  size: number | null;
}

/** `<mode> SP <type> SP <oid> SP+ <size> TAB <path>`; empty output means the path is absent. */
function parseTreeEntry(output: string): TreeEntry | null {
  const match = /^\d+ (\w+) ([0-9a-f]+) +(-|\d+)\t/.exec(output);
  if (match === null) return null;
  const [, type = '', oid = '', size = '-'] = match;
  return { type, oid, size: type === 'blob' && size !== '-' ? Number(size) : null };
}

async function defaultBranchHead(git: Git, options: LocalProviderOptions): Promise<DefaultBranchHead> {
  let branch = options.defaultBranch;
  if (branch === undefined) {
    const symbolic = await git(['symbolic-ref', '--quiet', '--short', 'HEAD']);
    branch = symbolic.ok ? symbolic.stdout.toString('utf8').trim() || 'main' : 'main';
  }
  const head = await git(['rev-parse', '--verify', '--quiet', '--end-of-options', `refs/heads/${branch}^{commit}`]);
  const sha = head.ok ? head.stdout.toString('utf8').trim() : '';
  if (!isObjectId(sha)) return { transient: `branch ${branch} has no commit in ${options.path}` };
  return { sha, branch };
}
