/** The Node lines Switchyard supports (package.json `engines`); its native addon is built for them. */
export const SUPPORTED_NODE_MAJORS: readonly number[] = [24, 26];

/** Why `version` (as `process.version` spells it) cannot run Switchyard, or null when it can. */
export function unsupportedNode(version: string): string | null {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (SUPPORTED_NODE_MAJORS.includes(major)) return null;
  return `Node ${version} is not supported; use Node ${SUPPORTED_NODE_MAJORS.join(' or ')} (the README says how to get one without root)`;
}
