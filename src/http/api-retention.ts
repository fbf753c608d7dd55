import { z } from 'zod';
import { parseDuration } from '../../lib/duration.ts';
import type { RetentionSchedule } from '../retention/schedule.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { Router } from './router.ts';

const passSchema = z
  .object({
    /** Ended runs older than this are archived (`0s`: every ended run); the configured window without it. */
    olderThan: z.string().optional(),
    dryRun: z.boolean().default(false),
  })
  .strict();

/** `POST /api/v1/retention {olderThan?, dryRun?}`: one retention pass now; answers its report (docs/retention.md). */
export function registerRetentionRoutes(router: Router, deps: { retention: RetentionSchedule }): void {
  router.on('POST', '/api/v1/retention', async ({ req, res }) => {
    const body = parseBody(passSchema, await readJson(req, 16 * 1024));
    const policy = deps.retention.policy;
    if (body.olderThan !== undefined) {
      const ms = parseDuration(body.olderThan);
      if (ms === null) throw new HttpError(400, 'invalid request', `olderThan must be a duration such as 30d, 12h, 90m or 0s, got ${JSON.stringify(body.olderThan)}`);
      policy.runsOlderThanMs = ms;
    }
    sendJson(res, 200, { report: await deps.retention.runNow(policy, body.dryRun) });
  });
}
