import type { LockWorkflow } from '../../machines/lock.types.ts';
import { isUntrustedRun, type RunSource } from '../pipeline/run-source.ts';
import type { BuildCaches } from './build-caches.ts';

export const BUILDER_ROLE = 'kici:role:builder';

/**
 * Whether a new run starts with a build job (docs/blobs.md#source-and-dependency-caches), decided
 * once as the run is created and frozen into its plan: its workflow has TypeScript source
 * (`contentHash`), it has a repository to clone, an agent that builds is connected, and that source
 * is not cached yet for the run's trust scope. Without a builder the jobs clone and install, as before.
 */
export function buildPlanner(deps: { builds: BuildCaches | null; builderConnected: () => boolean }) {
  return async (source: Pick<RunSource, 'repository' | 'repoUrl' | 'event' | 'trustTier'>, workflow: LockWorkflow): Promise<{ contentHash: string } | null> => {
    const { builds } = deps;
    const contentHash = workflow.contentHash;
    if (!builds || !contentHash || source.repoUrl === null || !deps.builderConnected()) return null;
    const query = { repository: source.repository, untrusted: isUntrustedRun(source), contentHash, lockfileHash: null, platform: null, arch: null };
    return (await builds.has(query, 'source')) ? null : { contentHash };
  };
}
