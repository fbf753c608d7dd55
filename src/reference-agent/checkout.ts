import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { JobDispatch, SourceAuth } from '../ws/messages.ts';
import type { Env } from './environment.ts';
import type { ProcessResult } from './process-group.ts';

export class CheckoutError extends Error {
  override readonly name = 'CheckoutError';
}

/** Runs one git command in the job's process scope; output goes to `onLine`, else to the runner log. */
export type GitRunner = (args: string[], cwd: string, env: Env, onLine?: (line: string) => void) => Promise<ProcessResult>;

export interface CheckoutPlan {
  dispatch: JobDispatch;
  /** Where the repository is cloned; must not exist yet, its parent must. */
  targetDir: string;
  /** A private directory for credential helpers, removed with the job's workspace. */
  authDir: string;
  baseEnv: Env;
  git: GitRunner;
}

/**
 * Clones `repoUrl` at `ref` (shallow) and makes HEAD equal `sha` (docs/protocol.md#jobdispatch); a run
 * started by hand for no branch or commit is sent `HEAD` for both: the clone's default branch. Secrets reach
 * git through GIT_ASKPASS or GIT_SSH_COMMAND files and variables, never through the URL or argv.
 */
export async function checkoutRepository(plan: CheckoutPlan): Promise<string> {
  const { dispatch, targetDir, git } = plan;
  const env = { ...plan.baseEnv, ...(await credentialEnv(plan)) };
  const auth = ['-c', 'credential.helper=', '-c', 'core.askPass='];
  const branch = dispatch.ref === 'HEAD' ? [] : ['--branch', dispatch.ref];
  const clone = await git(
    [...auth, 'clone', '--quiet', '--depth', '1', '--single-branch', '--no-tags', ...branch, '--', dispatch.repoUrl, targetDir],
    dirname(targetDir),
    env,
  );
  if (!succeeded(clone)) throw new CheckoutError(`git clone of ${dispatch.ref} failed (${describe(clone)})`);
  const cloned = await head(plan, env);
  if (dispatch.sha === 'HEAD') return cloned;
  if (cloned === dispatch.sha.toLowerCase()) return dispatch.sha;
  // The branch moved on since the dispatch: fetch the dispatched commit itself.
  const fetch = await git([...auth, 'fetch', '--quiet', '--depth', '1', 'origin', dispatch.sha], targetDir, env);
  const detach = succeeded(fetch) ? await git(['checkout', '--quiet', '--detach', dispatch.sha], targetDir, env) : fetch;
  const actual = succeeded(detach) ? await head(plan, env) : 'unknown';
  if (actual !== dispatch.sha.toLowerCase()) {
    throw new CheckoutError(`HEAD ${actual} of ${dispatch.ref} does not match the dispatched sha ${dispatch.sha}`);
  }
  return dispatch.sha;
}

async function head(plan: CheckoutPlan, env: Env): Promise<string> {
  const lines: string[] = [];
  const result = await plan.git(['rev-parse', 'HEAD'], plan.targetDir, env, (line) => lines.push(line));
  return succeeded(result) ? (lines[0] ?? '').trim().toLowerCase() : 'unknown';
}

function succeeded(result: ProcessResult): boolean {
  return result.exitCode === 0;
}

function describe(result: ProcessResult): string {
  if (result.spawnError !== undefined) return result.spawnError;
  return result.signal !== null ? `killed by ${result.signal}` : `exit code ${String(result.exitCode)}`;
}

async function credentialEnv(plan: CheckoutPlan): Promise<Env> {
  const auth: SourceAuth | undefined =
    plan.dispatch.sourceAuth ??
    (plan.dispatch.token !== undefined ? { kind: 'basic', secret: plan.dispatch.token } : undefined);
  const env: Env = { GIT_TERMINAL_PROMPT: '0' };
  if (auth === undefined) return env;
  await mkdir(plan.authDir, { recursive: true, mode: 0o700 });
  return auth.kind === 'basic' ? { ...env, ...(await askPass(plan.authDir, auth)) } : { ...env, ...(await sshCommand(plan.authDir, auth)) };
}

/** The helper prints the user or the secret from its own environment; the file holds no secret. */
async function askPass(authDir: string, auth: SourceAuth): Promise<Env> {
  const script = join(authDir, 'askpass.sh');
  const body = '#!/bin/sh\ncase "$1" in\n  [Uu]sername*) printf \'%s\\n\' "$SY_GIT_USER" ;;\n  *) printf \'%s\\n\' "$SY_GIT_SECRET" ;;\nesac\n';
  await writeFile(script, body, { mode: 0o700 });
  await chmod(script, 0o700);
  return { GIT_ASKPASS: script, SY_GIT_USER: auth.user ?? 'x-access-token', SY_GIT_SECRET: auth.secret };
}

async function sshCommand(authDir: string, auth: SourceAuth): Promise<Env> {
  const key = join(authDir, 'id_key');
  const knownHosts = join(authDir, 'known_hosts');
  await writeFile(key, auth.secret.endsWith('\n') ? auth.secret : `${auth.secret}\n`, { mode: 0o600 });
  await writeFile(knownHosts, auth.sshKnownHostsPem ?? '', { mode: 0o600 });
  const strict = auth.sshHostKeyPolicy === 'pinned' ? 'yes' : 'accept-new';
  const quote = (path: string) => `'${path.replaceAll("'", "'\\''")}'`;
  return {
    GIT_SSH_COMMAND: `ssh -i ${quote(key)} -o IdentitiesOnly=yes -o StrictHostKeyChecking=${strict} -o UserKnownHostsFile=${quote(knownHosts)}`,
  };
}
