import { createECDH, createPrivateKey, createPublicKey, hkdfSync, randomUUID, sign, type KeyObject } from 'node:crypto';

/** How long a minted token is good for: long enough to sign one attestation. */
export const ID_TOKEN_TTL_S = 300;
const INFO = 'switchyard job id tokens v1';

/** The job a token is minted for, as its run froze it. */
export interface IdTokenSubject {
  runId: string;
  jobKey: string;
  dispatchId: string;
  repository: string;
  ref: string;
  sha: string;
  workflowName: string;
  workflowFile: string | null;
}

const b64url = (bytes: Buffer) => bytes.toString('base64url');

/**
 * Short-lived ID tokens for a running job (`ctx.kici.oidc.token()`, which `ctx.attestProvenance`
 * signs its statement with; docs/blobs.md#provenance): an ES256 JWT whose claims (repository, ref,
 * commit, workflow, run and job) come from the run's frozen source, never from the agent. The key is
 * derived from the master key, so every coordinator of one installation signs alike and publishes
 * the same key at `/.well-known/jwks.json`.
 */
export class IdTokens {
  private readonly privateKey: KeyObject;
  private readonly publicJwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string; kid: string; alg: 'ES256'; use: 'sig' };

  constructor(
    masterKey: Buffer,
    private readonly deps: { issuer: () => string; now: () => number; coordinatorId: string },
  ) {
    const d = Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), INFO, 32));
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(d);
    const point = ecdh.getPublicKey();
    const [x, y] = [b64url(point.subarray(1, 33)), b64url(point.subarray(33, 65))];
    this.privateKey = createPrivateKey({ key: { kty: 'EC', crv: 'P-256', d: b64url(d), x, y }, format: 'jwk' });
    const kid = b64url(Buffer.from(createPublicKey(this.privateKey).export({ format: 'der', type: 'spki' })).subarray(-16));
    this.publicJwk = { kty: 'EC', crv: 'P-256', x, y, kid, alg: 'ES256', use: 'sig' };
  }

  /** The key set a verifier fetches. */
  jwks(): { keys: object[] } {
    return { keys: [this.publicJwk] };
  }

  mint(subject: IdTokenSubject, audience: string): { token: string; expiresIn: number; jti: string } {
    const iat = Math.floor(this.deps.now() / 1000);
    const jti = randomUUID();
    const claims = {
      ...{ iss: this.deps.issuer(), aud: audience, sub: `repo:${subject.repository}:ref:${subject.ref}`, iat, nbf: iat, exp: iat + ID_TOKEN_TTL_S, jti },
      ...{ repository: subject.repository, ref: subject.ref, sha: subject.sha, workflow_ref: `${subject.repository}/${subject.workflowFile ?? subject.workflowName}@${subject.ref}` },
      ...{ kici_run_id: subject.runId, kici_job_id: subject.dispatchId, job_key: subject.jobKey, orchestrator_id: this.deps.coordinatorId },
    };
    const header = { alg: 'ES256', typ: 'JWT', kid: this.publicJwk.kid };
    const signingInput = `${b64url(Buffer.from(JSON.stringify(header)))}.${b64url(Buffer.from(JSON.stringify(claims)))}`;
    const signature = sign('sha256', Buffer.from(signingInput), { key: this.privateKey, dsaEncoding: 'ieee-p1363' });
    return { token: `${signingInput}.${b64url(signature)}`, expiresIn: ID_TOKEN_TTL_S, jti };
  }
}
