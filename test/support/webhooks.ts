import { createRequire } from 'node:module';
import { sign } from '@octokit/webhooks-methods';

const require = createRequire(import.meta.url);
const examples = require('@octokit/webhooks-examples') as { name: string; examples: Record<string, unknown>[] }[];

/** GitHub's own example push payload, pointed at our repository and commit. */
export function pushPayload(sha: string, repository = 'acme/app'): Record<string, unknown> {
  const example = structuredClone(examples.find((e) => e.name === 'push')?.examples[0] ?? {});
  const repo = example['repository'] as Record<string, unknown>;
  return {
    ...example,
    ref: 'refs/heads/main',
    after: sha,
    deleted: false,
    commits: [],
    repository: { ...repo, full_name: repository, name: repository.split('/')[1], default_branch: 'main' },
  };
}

/** The headers GitHub sends with a delivery, signed with `secret` unless a signature is given. */
export async function githubHeaders(secret: string, body: string, deliveryId: string, event = 'push', signature?: string): Promise<Record<string, string>> {
  return {
    'content-type': 'application/json',
    'x-github-event': event,
    'x-github-delivery': deliveryId,
    'x-hub-signature-256': signature ?? (await sign(secret, body)),
  };
}
