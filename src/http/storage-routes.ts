import type { Kysely } from 'kysely';
import { attestationBlobKey, listAttestations } from '../caches/attestations.ts';
import type { Storage } from '../caches/index.ts';
import type { Schema } from '../db/schema.ts';
import { registerBlobRoutes, sendBlob } from './blob-routes.ts';
import { HttpError, sendJson } from './respond.ts';
import type { Router } from './router.ts';

/**
 * The blob URLs agents were handed (when the coordinator can sign them), and the run's provenance
 * attestations for administrators: `GET /api/v1/runs/:id/attestations` lists them,
 * `…/attestations/:n/bundle` serves one bundle.
 */
export function registerStorageRoutes(router: Router, deps: { db: Kysely<Schema>; storage: Storage; issuer: () => string }): void {
  const { uploads, signer, store, idTokens } = deps.storage;
  if (uploads && signer) registerBlobRoutes(router, { uploads, signer });
  if (idTokens) {
    // Where a verifier of a job's ID token (a provenance bundle's identity) finds the key; no token needed.
    router
      .on('GET', '/.well-known/jwks.json', ({ res }) => sendJson(res, 200, idTokens.jwks()))
      .on('GET', '/.well-known/openid-configuration', ({ res }) => {
        const issuer = deps.issuer();
        sendJson(res, 200, { issuer, jwks_uri: `${issuer}/.well-known/jwks.json`, id_token_signing_alg_values_supported: ['ES256'], subject_types_supported: ['public'], response_types_supported: ['id_token'] });
      });
  }
  router
    .on('GET', '/api/v1/runs/:id/attestations', async ({ res, params }) => sendJson(res, 200, { attestations: await listAttestations(deps.db, params['id'] ?? '') }))
    .on('GET', '/api/v1/runs/:id/attestations/:n/bundle', async ({ res, params }) => {
      const id = Number(params['n']);
      if (!Number.isSafeInteger(id)) throw new HttpError(400, 'bad request', `not an attestation number: ${params['n'] ?? ''}`);
      const key = await attestationBlobKey(deps.db, params['id'] ?? '', id);
      const found = key === null ? null : await store.get(key);
      if (!found) throw new HttpError(404, 'not found', `no attestation ${id} of run ${params['id'] ?? ''}`);
      await sendBlob(res, found, 'application/json');
    });
}
