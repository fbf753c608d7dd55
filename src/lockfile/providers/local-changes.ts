import { gitIn, type Git } from './local-git.ts';
import { isObjectId } from './types.ts';
import type { ChangedFilesSource } from './types.ts';

/** `git diff --name-only` output is small; this bounds a runaway one (about 200,000 paths). */
const MAX_DIFF_BYTES = 16 * 1024 * 1024;

/**
 * Changed files from a git repository on disk: `git diff --name-only base...head` (both trees whole
 * when they share no commit), renames listed as a removal and an addition. Only full object ids
 * reach git; NUL-separated names are never quoted.
 */
export function createLocalChanges(path: string): ChangedFilesSource {
  const git = gitIn(path);
  const diff = (range: string[]) => git(['diff', '--name-only', '-z', '--no-renames', '--end-of-options', ...range], MAX_DIFF_BYTES);
  return {
    async between({ base, head }) {
      if (!isObjectId(base) || !isObjectId(head)) {
        return { transient: `${JSON.stringify(`${base}...${head}`)} is not a range of commit ids` };
      }
      let listed = await diff([`${base}...${head}`]);
      // Two histories with no commit in common (an orphan branch) differ by every file their trees do.
      if (!listed.ok && (await noCommonHistory(git, base, head))) listed = await diff([base, head]);
      if (!listed.ok) return { transient: `listing the files changed in ${base}...${head} in ${path}: ${listed.detail}` };
      return { files: listed.stdout.toString('utf8').split('\0').filter((name) => name !== '') };
    },
  };
}

/** `git merge-base` exits 1 when two commits share no history (and 128 when one is unknown). */
async function noCommonHistory(git: Git, base: string, head: string): Promise<boolean> {
  const mergeBase = await git(['merge-base', '--end-of-options', base, head]);
  return !mergeBase.ok && mergeBase.exitCode === 1;
}
