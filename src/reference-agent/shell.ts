import { accessSync, constants } from 'node:fs';
import { basename, delimiter, join } from 'node:path';

/** Finds an executable on a PATH string, like `command -v`. */
export function findOnPath(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch (thrown: unknown) {
      if ((thrown as NodeJS.ErrnoException).code !== 'ENOENT' && (thrown as NodeJS.ErrnoException).code !== 'EACCES') {
        throw thrown;
      }
    }
  }
  return undefined;
}

/**
 * `[shell, "-e", "-c", run]`, with `-o pipefail` for bash (docs/protocol.md#labels-executors-and-matching). Without `shell` the
 * step runs in bash when the PATH has it, else in sh.
 */
export function shellArgv(run: string, shell: string | undefined, path: string | undefined): [string, ...string[]] {
  const chosen = shell ?? (findOnPath('bash', path) !== undefined ? 'bash' : 'sh');
  return basename(chosen) === 'bash' ? [chosen, '-e', '-o', 'pipefail', '-c', run] : [chosen, '-e', '-c', run];
}
