import { gitIn } from './local-git.ts';
import { isObjectId } from './types.ts';
import type { ChangedFilesSource } from './types.ts';

/** `git diff --name-only` output is small; this bounds a runaway one (about 200,000 paths). */
const MAX_DIFF_BYTES = 16 * 1024 * 1024;

/**
 * Changed files from a git repository on disk: `git diff --name-only base...head` (both trees whole
 * when they share no commit), renames listed as a removal and an addition. Only full object ids reach git; NUL-separated names are never quoted.
 */
export function createLocalChanges(path: string): ChangedFilesSource {
  const git = gitIn(path);
  return {
    async between({ base, head }) {
      if (!isObjectId(base) || !isObjectId(head)) {
        return { transient: `${JSON.stringify(`${base}...${head}`)} is not a range of commit ids` };
      }
      // Two histories with no commit in common (an orphan branch) differ by every file their trees do.
      const mergeBase = await git(['merge-base', '--end-of-options', base, head]);
      const range = !mergeBase.ok && mergeBase.exitCode === 1 ? [base, head] : [`${base}...${head}`];
      const diff = await git(['diff', '--name-only', '-z', '--no-renames', '--end-of-options', ...range], MAX_DIFF_BYTES);
      if (!diff.ok) return { transient: `listing the files changed in ${base}...${head} in ${path}: ${diff.detail}` };
      return { files: diff.stdout.toString('utf8').split('\0').filter((name) => name !== '') };
    },
  };
}
