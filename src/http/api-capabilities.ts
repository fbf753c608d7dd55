import { readFileSync } from 'node:fs';
import { AGENT_MESSAGE_SCHEMAS, ORCHESTRATOR_MESSAGE_SCHEMAS } from '../ws/messages/parse.ts';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '../ws/messages/common.ts';
import { sendJson } from './respond.ts';
import type { Router } from './router.ts';

/** The version this build was packaged as, from package.json at the repository root. */
function packageVersion(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  const parsed = JSON.parse(text) as { version?: unknown };
  return typeof parsed.version === 'string' ? parsed.version : 'unknown';
}

/**
 * What this coordinator is and speaks, for agents and tools before they connect: its version and
 * the protocol manifest, the message types read straight from the schemas the gateway parses with.
 */
export function capabilities() {
  const versions: number[] = [];
  for (let v = MIN_PROTOCOL_VERSION; v <= PROTOCOL_VERSION; v++) versions.push(v);
  return {
    name: 'switchyard',
    version: packageVersion(),
    protocol: {
      version: PROTOCOL_VERSION,
      supportedVersions: versions,
      endpoint: '/ws/agent',
      /** Agent → coordinator messages the gateway accepts. */
      accepts: Object.keys(AGENT_MESSAGE_SCHEMAS).sort(),
      /** Coordinator → agent messages it may send. */
      sends: Object.keys(ORCHESTRATOR_MESSAGE_SCHEMAS).sort(),
    },
  };
}

/** `GET /api/v1/capabilities`: no token needed (docs/http-api.md#routes). */
export function registerCapabilityRoutes(router: Router): void {
  const answer = capabilities();
  router.on('GET', '/api/v1/capabilities', ({ res }) => sendJson(res, 200, answer));
}
