import { z } from 'zod';
import { deleteTestRunSecrets, insertTestRunSecrets } from '../db/secrets.ts';
import { DecryptError } from '../secrets/crypto.ts';
import { SecretsUnavailableError } from '../secrets/service.ts';
import type { SecretService } from '../secrets/service.ts';
import { manualRunSchema, planManualRun, startPlannedRun } from './api-runs.ts';
import type { RunApiDeps } from './api-runs.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export type TestRunApiDeps = Pick<RunApiDeps, 'db' | 'createRun' | 'timeouts' | 'maxAttempts' | 'now' | 'repository'> & { secrets: SecretService };

const MAX_BODY = 5 * 1024 * 1024;

/** A manual run (docs/http-api.md#runs) plus the encrypted test secrets of SEC-6 (docs/http-api.md#test-runs). */
const testRunSchema = manualRunSchema.extend({
  uploadId: z.string().min(1).optional(),
  encryptedSecrets: z.string().min(1).optional(),
  encryptedSecretsKey: z.string().min(1).optional(),
});

/** Test uploads and test runs (SEC-6). */
export function registerTestRunRoutes(router: Router, deps: TestRunApiDeps): void {
  router
    .on('POST', '/api/v1/test-uploads', async ({ res }) => {
      const upload = await unavailableAs503(() => deps.secrets.createUpload());
      sendJson(res, 201, upload);
    })
    .on('POST', '/api/v1/test-runs', (ctx) => createTestRunRoute(deps, ctx));
}

/**
 * The blob is decrypted here once, to refuse one that does not open, and then kept encrypted with
 * the run (never in its input summary); it is decrypted again at each dispatch. The blob's row is
 * written before the run exists and removed if the run cannot be created, so no dispatch runs without it.
 */
async function createTestRunRoute(deps: TestRunApiDeps, { req, res }: RouteContext): Promise<void> {
  const body = parseBody(testRunSchema, await readJson(req, MAX_BODY));
  const blob = await checkedBlob(deps, body);
  const planned = await planManualRun(deps, body);
  if (blob) planned.source.testRunSecrets = true;
  if (blob) await insertTestRunSecrets(deps.secrets.db, { runId: planned.runId, ...blob, now: deps.now() });
  try {
    await startPlannedRun(deps, planned);
  } catch (thrown) {
    if (blob) await deleteTestRunSecrets(deps.secrets.db, planned.runId);
    throw thrown;
  }
  sendJson(res, 201, { runId: planned.runId, jobs: planned.input.jobs.map((job) => job.key), testRun: true, encryptedSecrets: blob !== null });
}

type TestRunBody = z.infer<typeof testRunSchema>;

async function checkedBlob(deps: TestRunApiDeps, body: TestRunBody): Promise<{ uploadId: string; senderPublicKey: string; encryptedSecrets: string } | null> {
  const { encryptedSecrets, encryptedSecretsKey, uploadId } = body;
  if ((encryptedSecrets === undefined) !== (encryptedSecretsKey === undefined)) {
    throw new HttpError(400, 'invalid request', 'encryptedSecrets and encryptedSecretsKey go together: send both or neither');
  }
  if (encryptedSecrets === undefined || encryptedSecretsKey === undefined) return null;
  if (uploadId === undefined) throw new HttpError(400, 'invalid request', 'encryptedSecrets needs the uploadId whose public key they were encrypted to');
  const upload = await unavailableAs503(() => deps.secrets.uploadKey(uploadId, true));
  if (!upload.ok) throw new HttpError(upload.status, upload.status === 404 ? 'not found' : 'gone', upload.reason);
  try {
    deps.secrets.openTestBlob(upload.privateKeyDer, encryptedSecretsKey, encryptedSecrets);
  } catch (thrown) {
    if (thrown instanceof DecryptError) throw new HttpError(400, 'secrets do not decrypt', thrown.message);
    throw thrown;
  }
  return { uploadId, senderPublicKey: encryptedSecretsKey, encryptedSecrets };
}

async function unavailableAs503<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (thrown) {
    if (thrown instanceof SecretsUnavailableError) throw new HttpError(503, 'secrets unavailable', thrown.message);
    throw thrown;
  }
}
