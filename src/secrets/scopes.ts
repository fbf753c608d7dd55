/**
 * Secret scopes (docs/http-api.md#secrets): where a secret applies, from the widest to the narrowest.
 *
 * | scope | applies to | rank |
 * |---|---|---|
 * | `global` | every job | 0 |
 * | `org:<owner>` | jobs of repositories `<owner>/*` | 1 |
 * | `repo:<repository>` | jobs of that repository | 2 |
 * | `env:<environment>` | jobs in that environment, any repository | 3 |
 * | `repo:<repository>/env:<environment>` | jobs in that environment of that repository | 4 |
 *
 * For one key the applicable scope of highest rank wins ("the longest path").
 */
export type Scope =
  | { kind: 'global' }
  | { kind: 'org'; owner: string }
  | { kind: 'repo'; repository: string }
  | { kind: 'env'; environment: string }
  | { kind: 'repo-env'; repository: string; environment: string };

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const REPOSITORY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(\/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?$/;
/** A secret's key: what the job reads it as (an environment variable name). */
export const SECRET_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

const SCOPE_FORMS = 'global, org:<owner>, repo:<owner>/<name>, env:<environment> or repo:<owner>/<name>/env:<environment>';

/** The scope named by `text`, or why it is not one (a reason fit for a 400). */
export function parseScope(text: string): Scope | { error: string } {
  if (text === 'global') return { kind: 'global' };
  const bad = { error: `unknown scope ${JSON.stringify(text)}: a scope is ${SCOPE_FORMS}` };
  if (text.startsWith('org:')) {
    const owner = text.slice(4);
    return NAME.test(owner) ? { kind: 'org', owner } : bad;
  }
  if (text.startsWith('env:')) {
    const environment = text.slice(4);
    return NAME.test(environment) ? { kind: 'env', environment } : bad;
  }
  if (!text.startsWith('repo:')) return bad;
  const rest = text.slice(5);
  const envAt = rest.indexOf('/env:');
  if (envAt < 0) return REPOSITORY.test(rest) ? { kind: 'repo', repository: rest } : bad;
  const repository = rest.slice(0, envAt);
  const environment = rest.slice(envAt + 5);
  return REPOSITORY.test(repository) && NAME.test(environment) ? { kind: 'repo-env', repository, environment } : bad;
}

export function formatScope(scope: Scope): string {
  switch (scope.kind) {
    case 'global':
      return 'global';
    case 'org':
      return `org:${scope.owner}`;
    case 'repo':
      return `repo:${scope.repository}`;
    case 'env':
      return `env:${scope.environment}`;
    case 'repo-env':
      return `repo:${scope.repository}/env:${scope.environment}`;
  }
}

/** An applicable scope with its rank and, for environment scopes, the environment it belongs to. */
export interface ApplicableScope {
  scope: string;
  rank: number;
  environment: string | null;
}

/** Every scope that applies to a job of `repository` running in `environments`, widest first. */
export function applicableScopes(repository: string, environments: readonly string[]): ApplicableScope[] {
  const scopes: ApplicableScope[] = [{ scope: 'global', rank: 0, environment: null }];
  const slash = repository.indexOf('/');
  if (slash > 0) scopes.push({ scope: `org:${repository.slice(0, slash)}`, rank: 1, environment: null });
  scopes.push({ scope: `repo:${repository}`, rank: 2, environment: null });
  for (const environment of environments) scopes.push({ scope: `env:${environment}`, rank: 3, environment });
  for (const environment of environments) scopes.push({ scope: `repo:${repository}/env:${environment}`, rank: 4, environment });
  return scopes;
}
