import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Repositories still on disk, removed when the process exits. No node:test hook, so benchmarks and
 * the chaos runner can use these repositories too without turning into a test file.
 */
const leftovers = new Set<string>();
process.once('exit', () => {
  for (const path of leftovers) rmSync(path, { recursive: true, force: true });
});

/** A lock file of schema 29 with one workflow (push to main) whose jobs run shell steps. */
export function lockFileWith(workflows: object[]): string {
  const source = { file: '.kici/workflows/ci.ts', export: '#default' };
  return JSON.stringify({ schemaVersion: 29, source, contentHash: '0'.repeat(64), workflows }, null, 2);
}

export function pushWorkflow(name: string, jobs: object[], extra: object = {}): object {
  return {
    name,
    source: { file: '.kici/workflows/ci.ts', export: '#default' },
    contentHash: '',
    compileSchemaVersion: 0,
    triggers: [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }],
    jobs,
    ...extra,
  };
}

export function runJob(name: string, steps: string[], extra: object = {}): object {
  return {
    _type: 'static',
    name,
    runsOn: [{ kind: 'exact', value: 'linux' }],
    runsOnPick: 'deterministic',
    needs: [],
    steps: steps.map((run, i) => ({ name: `step-${i + 1}`, hasOutputs: false, run })),
    ...extra,
  };
}

/** `git` in `cwd` as a fixed test author, without a shell; returns its trimmed output. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
}

/** A real git repository on disk; `commit` writes files and returns the new commit's sha. */
export async function createLockRepo() {
  const path = await mkdtemp(join(tmpdir(), 'sy-repo-'));
  leftovers.add(path);
  git(path, 'init', '-q', '-b', 'main');
  return {
    path,
    commit(files: Record<string, string>, message = 'change'): string {
      for (const [file, content] of Object.entries(files)) {
        mkdirSync(join(path, file, '..'), { recursive: true });
        writeFileSync(join(path, file), content);
      }
      git(path, 'add', '-A');
      git(path, 'commit', '-q', '-m', message);
      return git(path, 'rev-parse', 'HEAD');
    },
    remove(): void {
      rmSync(path, { recursive: true, force: true });
      leftovers.delete(path);
    },
  };
}
