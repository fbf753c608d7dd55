/**
 * A git repository on disk whose lock file has one push workflow with one shell job, for the
 * webhook benchmark (test/support/lock-repo.ts builds the same for tests but pulls in node:test).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SOURCE = { file: '.kici/workflows/ci.ts', export: '#default' };

function lockFile(workflow: string, label: string): string {
  const job = {
    _type: 'static',
    name: 'build',
    runsOn: [{ kind: 'exact', value: label }],
    runsOnPick: 'deterministic',
    needs: [],
    steps: [{ name: 'step-1', hasOutputs: false, run: 'true' }],
  };
  const push = { _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] };
  const workflows = [{ name: workflow, source: SOURCE, contentHash: '', compileSchemaVersion: 0, triggers: [push], jobs: [job] }];
  return JSON.stringify({ schemaVersion: 29, source: SOURCE, contentHash: '0'.repeat(64), workflows }, null, 2);
}

/** Creates the repository with one commit on `main`; returns its path, that commit and a remover. */
export function createLockRepo(workflow: string, label: string): { path: string; sha: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), 'sy-bench-repo-'));
  const env = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b' };
  const git = (...args: string[]) => execFileSync('git', args, { cwd: path, encoding: 'utf8', env }).trim();
  git('init', '-q', '-b', 'main');
  mkdirSync(join(path, '.kici'), { recursive: true });
  writeFileSync(join(path, '.kici/kici.lock.json'), lockFile(workflow, label));
  git('add', '-A');
  git('commit', '-q', '-m', 'lock file');
  return { path, sha: git('rev-parse', 'HEAD'), remove: () => rmSync(path, { recursive: true, force: true }) };
}
