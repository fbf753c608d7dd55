import type { SandboxExpectation, SandboxRequest } from '../../../src/sandbox/index.ts';

/** A normalized envelope for a GitHub push to `main` (lockfile.md §10-11), trimmed payload. */
export const pushToMain = {
  type: 'push',
  targetBranch: 'main',
  provider: 'github',
  sourceRepo: 'acme/widgets',
  senderUsername: 'octocat',
  senderUserId: '583231',
  changedFiles: ['src/index.ts', 'README.md'],
  payload: {
    ref: 'refs/heads/main',
    before: '6113728f27ae82c7b1a177c8d03f9e96e0adf246',
    after: '9f2c3b1e4d5a67890abcdef1234567890abcdef1',
    repository: { id: 1296269, full_name: 'acme/widgets', default_branch: 'main', private: true },
    pusher: { name: 'octocat', email: 'octocat@github.com' },
    head_commit: { id: '9f2c3b1e4d5a67890abcdef1234567890abcdef1', message: 'Fix the frobnicator' },
    installation: { id: 42 },
  },
};

/** A pull request from a feature branch into `develop`. */
export const pullRequestToDevelop = {
  type: 'pull_request',
  action: 'opened',
  targetBranch: 'develop',
  sourceBranch: 'feature/login',
  baseBranch: 'develop',
  isForkPR: false,
  provider: 'github',
  sourceRepo: 'acme/widgets',
  senderUserId: '583231',
  payload: {
    action: 'opened',
    number: 7,
    pull_request: { number: 7, head: { ref: 'feature/login', sha: 'b7e1' }, base: { ref: 'develop' } },
  },
};

export const ENVIRONMENT_EXPRESSION = "(event) => event.targetBranch === 'main' ? 'production' : 'staging'";
export const ENV_EXPRESSION = '(event) => ({ SHA: event.payload.after })';

/** A request for job `deploy` over a push to main; override what the case is about. */
export function request(
  expression: string,
  expect: SandboxExpectation = 'string',
  overrides: Partial<SandboxRequest> = {},
): SandboxRequest {
  const field = expect === 'string' ? 'environments[0].value' : 'env';
  return { expression, expect, field, jobName: 'deploy', event: pushToMain, ...overrides };
}
