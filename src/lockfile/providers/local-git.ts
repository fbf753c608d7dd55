import { execFile } from 'node:child_process';
import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, normalize } from 'node:path';

/** `exitCode`: git's exit status, when it ran and failed (absent when it did not start or was killed). */
export type GitResult = { ok: true; stdout: Buffer } | { ok: false; detail: string; exitCode?: number };
export type Git = (args: string[], maxBuffer?: number) => Promise<GitResult>;

/**
 * `git -C <path> <args>` without a shell. Inherited `GIT_*` variables are dropped, so that only the
 * repository at `path` is read, whatever the coordinator's environment holds.
 */
export function gitIn(path: string): Git {
  // Made at the first call: a provider is made for every delivery, and most never run git (the lock
  // file comes from the cache or the repository's running `git cat-file --batch`).
  let env: NodeJS.ProcessEnv | undefined;
  return (args, maxBuffer = 1024 * 1024) =>
    new Promise((resolve) => {
      env ??= gitEnvironment();
      execFile('git', ['-C', path, ...args], { encoding: 'buffer', maxBuffer, env }, (error, stdout, stderr) => {
        if (error === null) resolve({ ok: true, stdout });
        else {
          const detail = stderr.toString('utf8').trim() || error.message;
          resolve(typeof error.code === 'number' ? { ok: false, detail, exitCode: error.code } : { ok: false, detail });
        }
      });
    });
}

/** The coordinator's environment without inherited `GIT_*` variables, never prompting, in the C locale. */
export function gitEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('GIT_') && name !== 'LC_ALL') env[name] = value;
  return env;
}

/** Why `path` cannot be read as a local repository (the reason of a 400), or null when it can. */
export function localPathProblem(path: string): string | null {
  if (path.includes('\0')) return 'must not contain a NUL byte';
  if (!isAbsolute(path)) return `must be an absolute path, got ${JSON.stringify(path)}`;
  if (normalize(path) !== path) return `must be a normalized absolute path (no "." or ".." segments, no "//"), got ${JSON.stringify(path)}`;
  return null;
}

/**
 * Checks a local repository registration: an absolute path to an existing directory that is a git
 * repository, at its top (a work tree's root, or a bare repository). Returns the reason it is not.
 */
export async function localRepositoryProblem(path: string): Promise<string | null> {
  const malformed = localPathProblem(path);
  if (malformed !== null) return malformed;
  let real: string;
  try {
    if (!(await stat(path)).isDirectory()) return `${path} is not a directory`;
    real = await realpath(path);
  } catch (thrown) {
    const code = (thrown as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? `${path} does not exist` : `${path} cannot be read (${code ?? String(thrown)})`;
  }
  const git = gitIn(real);
  const gitDir = await git(['rev-parse', '--absolute-git-dir']);
  if (!gitDir.ok) return `${path} is not a git repository`;
  if (gitDir.stdout.toString('utf8').trim() === real) return null;
  const top = await git(['rev-parse', '--show-toplevel']);
  const topLevel = top.ok ? top.stdout.toString('utf8').trim() : '';
  if (topLevel === real) return null;
  return topLevel === '' ? `${path} is inside a git directory, not a repository` : `${path} is inside the git repository ${topLevel}; register its top directory`;
}
