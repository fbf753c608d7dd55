/** Hand-written GitHub webhook bodies, trimmed to realistic fields (docs.github.com webhook payloads). */

export const OWNER = { login: 'acme', id: 9919, type: 'Organization' };
export const SENDER = { login: 'octocat', id: 583231, type: 'User' };
export const INSTALLATION = { id: 4242, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDI0Mg==' };

/** `defaultBranch: null` leaves `default_branch` out. */
export function repository(fullName = 'acme/app', defaultBranch: string | null = 'develop') {
  const [owner = 'acme', name = 'app'] = fullName.split('/');
  return {
    id: 1296269,
    node_id: 'MDEwOlJlcG9zaXRvcnkxMjk2MjY5',
    name,
    full_name: fullName,
    private: false,
    owner: { ...OWNER, login: owner },
    html_url: `https://github.com/${fullName}`,
    clone_url: `https://github.com/${fullName}.git`,
    ...(defaultBranch === null ? {} : { default_branch: defaultBranch }),
  };
}

const envelope = { repository: repository(), sender: SENDER, installation: INSTALLATION };

export function push(ref: string, overrides: Record<string, unknown> = {}) {
  return {
    ref,
    before: '6113728f27ae82c7b1a177c8d03f9e96e0adf246',
    after: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
    created: false,
    deleted: false,
    forced: false,
    base_ref: null,
    compare: 'https://github.com/acme/app/compare/6113728f27ae...0d1a26e67d8f',
    commits: [
      {
        id: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
        message: 'Fix the build',
        added: ['src/new.ts'],
        removed: [],
        modified: ['README.md'],
      },
    ],
    head_commit: { id: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c', message: 'Fix the build' },
    pusher: { name: 'octocat', email: 'octocat@github.com' },
    ...envelope,
    ...overrides,
  };
}

export function pullRequestObject(options: { number?: number; headRepo?: string | null; base?: boolean } = {}) {
  const headRepo = options.headRepo === undefined ? 'acme/app' : options.headRepo;
  return {
    url: 'https://api.github.com/repos/acme/app/pulls/7',
    id: 1,
    number: options.number ?? 7,
    state: 'open',
    title: 'Add the widget',
    user: SENDER,
    draft: false,
    head: {
      label: `${headRepo?.split('/')[0] ?? 'ghost'}:feature/widget`,
      ref: 'feature/widget',
      sha: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
      user: SENDER,
      repo: headRepo === null ? null : repository(headRepo, 'main'),
    },
    ...(options.base === false
      ? {}
      : {
          base: {
            label: 'acme:main',
            ref: 'main',
            sha: 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
            user: OWNER,
            repo: repository(),
          },
        }),
  };
}

export function pullRequest(action: string, options: Parameters<typeof pullRequestObject>[0] = {}) {
  const pr = pullRequestObject(options);
  return { action, number: pr.number, pull_request: pr, ...envelope };
}

export function review(state: string) {
  return {
    action: 'submitted',
    review: { id: 80, user: SENDER, body: 'Looks good', state, commit_id: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' },
    pull_request: pullRequestObject(),
    ...envelope,
  };
}

export function reviewComment() {
  return {
    action: 'created',
    comment: { id: 11, body: 'nit: rename this', path: 'src/widget.ts', line: 3, user: SENDER },
    pull_request: pullRequestObject(),
    ...envelope,
  };
}

export function issueComment(body: string, onPullRequest: boolean) {
  return {
    action: 'created',
    issue: {
      number: 12,
      title: 'Deploy please',
      user: SENDER,
      state: 'open',
      ...(onPullRequest ? { pull_request: { url: 'https://api.github.com/repos/acme/app/pulls/12' } } : {}),
    },
    comment: { id: 99, body, user: SENDER },
    ...envelope,
  };
}

export function repositoryDispatch(eventType: string) {
  return { action: eventType, branch: 'develop', client_payload: { env: 'staging' }, ...envelope };
}

export function release(action: string, targetCommitish: string) {
  return {
    action,
    release: { id: 5, tag_name: 'v2.0.0', target_commitish: targetCommitish, name: 'v2.0.0', draft: false },
    ...envelope,
  };
}

export function refEvent(ref: string, refType: 'branch' | 'tag') {
  return { ref, ref_type: refType, master_branch: 'develop', pusher_type: 'user', ...envelope };
}

export function status(state: string, context: string, branches: string[]) {
  return {
    id: 6,
    sha: 'cccccccccccccccccccccccccccccccccccccccc',
    name: 'acme/app',
    target_url: 'https://ci.example.com/build/1',
    context,
    description: 'The build succeeded',
    state,
    branches: branches.map((name) => ({ name, commit: { sha: 'cccccccccccccccccccccccccccccccccccccccc' } })),
    ...envelope,
  };
}

export function workflowRun(action: string, name: string, conclusion: string | null, headBranch: string | null) {
  return {
    action,
    workflow_run: { id: 30433642, name, head_branch: headBranch, head_sha: 'dddd', status: 'completed', conclusion },
    workflow: { id: 159038, name },
    ...envelope,
  };
}

export function fork() {
  return { forkee: repository('someone/app', 'main'), ...envelope };
}

export function star(action: string) {
  return { action, starred_at: '2026-12-02T10:00:00Z', ...envelope };
}

export function watch() {
  return { action: 'started', ...envelope };
}

export function ping() {
  return { zen: 'Keep it logically awesome.', hook_id: 30, hook: { type: 'App', events: ['push'] }, ...envelope };
}
