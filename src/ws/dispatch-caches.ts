import { isUntrustedRun, type RunSource } from '../pipeline/run-source.ts';
import type { BuildCaches } from '../caches/build-caches.ts';
import { platformOf, type BuiltDispatch, type DispatchTarget } from './dispatch-builder.ts';

/**
 * A dispatch completed with the source and dependency caches as they are when it is sent
 * (docs/blobs.md#source-and-dependency-caches): a build job is told what is still missing (a build
 * that waited for another run's finds both and only confirms them); any other job gets the URLs
 * of what is there, so the agent neither clones its workflow source nor installs.
 */
export async function withBuildCaches(builds: BuildCaches | null, built: BuiltDispatch, target: DispatchTarget, source: RunSource): Promise<BuiltDispatch> {
  if (!builds || !built.ok || !source.workflow.contentHash) return built;
  const { platform, arch } = platformOf(target.agentLabels);
  const query = { repository: source.repository, untrusted: isUntrustedRun(source), contentHash: source.workflow.contentHash, lockfileHash: source.lockfileHash ?? null, platform, arch };
  const { dispatch } = built;
  if (dispatch.jobConfig.buildOnly === true) {
    const sourceNeeded = !(await builds.has(query, 'source'));
    const depsNeeded = query.lockfileHash !== null && !(await builds.has(query, 'deps'));
    return { ok: true, dispatch: { ...dispatch, jobConfig: { ...dispatch.jobConfig, buildSourceNeeded: sourceNeeded, buildDepsNeeded: depsNeeded } } };
  }
  return { ok: true, dispatch: { ...dispatch, ...(await builds.urlsFor(query)) } };
}
