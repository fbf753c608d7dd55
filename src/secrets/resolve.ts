import type { DispatchedJob } from '../../machines/intents.ts';
import type { LockStaticJob } from '../../machines/lock.types.ts';
import { coerceError } from '../../lib/errors.ts';
import { isTransientDatabaseError } from '../db/errors.ts';
import { appendAudit, secretOutputsOf, secretsInScopes, testRunSecretsOf } from '../db/secrets.ts';
import type { RunSource } from '../pipeline/run-source.ts';
import { referenceScopes, referencedFields, secretReferencesOf } from './references.ts';
import type { ReferencedFields } from './references.ts';
import { applicableScopes } from './scopes.ts';
import type { SecretService } from './service.ts';

/** The failure category of a job whose secrets could not be resolved (SEC-2). */
export const SECRET_RESOLUTION = 'secret_resolution';

/** Whether an environment accepts test-run secrets (`allowLocalExecution`, docs/http-api.md#test-runs). */
export type LocalExecutionAllowed = (environmentName: string) => Promise<boolean>;

/** The top-level dispatch fields that carry secrets (docs/protocol.md#jobdispatch), and every value in them. */
export interface DispatchSecrets {
  fields: { secrets?: Record<string, string>; namespacedSecrets?: Record<string, Record<string, string>>; runPublicKey?: string } & ReferencedFields;
  values: string[];
}

export type SecretResolution = ({ ok: true } & DispatchSecrets) | { ok: false; reason: string };

export interface ResolveTarget {
  runId: string;
  jobKey: string;
  dispatchId: string;
  source: RunSource;
  job: DispatchedJob;
}

/** The environments a job runs in: the one its init job resolved, else the static ones of its lock job. */
export function jobEnvironments(source: RunSource, job: DispatchedJob): string[] {
  if (job.resolved?.environment) return [job.resolved.environment];
  const lockJob = source.workflow.jobs.find((j): j is LockStaticJob => j._type === 'static' && j.name === job.baseName);
  return (lockJob?.environments ?? []).flatMap((ref) => (typeof ref.value === 'string' && ref.value !== '' && !ref.dynamic ? [ref.value] : []));
}

/** Upstream jobs whose secret outputs a job receives: its direct upstreams that succeeded. */
function succeededUpstreams(job: DispatchedJob): string[] {
  return Object.entries(job.upstream?.statuses ?? {}).flatMap(([key, status]) => (status === 'success' ? [key] : []));
}

/**
 * SEC-2/SEC-3: the secrets of one dispatch, fetched as it is sent. Stored secrets of every scope that
 * applies (the highest rank wins per key) form `secrets`; environment-scoped ones also
 * `namespacedSecrets{<environment>}`; upstream secret outputs fill keys still free; a test run's blob
 * overrides all. Every resolution that hands out a value, and every failed one, is audited with key names
 * only. Any failure is a reason, never a skip, except a database that failed for a moment (a reset
 * connection): that throws, and the dispatch is tried again instead of failing the job.
 */
export async function resolveDispatchSecrets(service: SecretService, allowed: LocalExecutionAllowed, target: ResolveTarget): Promise<SecretResolution> {
  const audit = { at: service.now(), actor: service.actor, action: 'resolve' as const, runId: target.runId, jobKey: target.jobKey, dispatchId: target.dispatchId };
  let resolved: DispatchSecrets;
  try {
    resolved = await resolve(service, allowed, target);
  } catch (thrown) {
    throwIfTransient(thrown);
    const reason = `${SECRET_RESOLUTION}: ${coerceError(thrown).message}`;
    await appendAudit(service.db, { ...audit, keys: [], outcome: reason }).catch(() => undefined);
    return { ok: false, reason };
  }
  const { secrets = {}, namespacedSecrets = {} } = resolved.fields;
  const referenced = secretReferencesOf(target.source.workflow).map((reference) => reference.text);
  const keys = [...Object.keys(secrets), ...Object.entries(namespacedSecrets).flatMap(([env, values]) => Object.keys(values).map((k) => `${env}/${k}`)), ...referenced];
  // A resolution that handed out no value has nothing to audit (and costs no write on the way of the dispatch).
  if (keys.length === 0) return { ok: true, ...resolved };
  try {
    await appendAudit(service.db, { ...audit, keys, outcome: 'resolved' });
  } catch (thrown) {
    throwIfTransient(thrown);
    return { ok: false, reason: `${SECRET_RESOLUTION}: the resolution could not be audited (${coerceError(thrown).message})` };
  }
  return { ok: true, ...resolved };
}

/**
 * A database error worth retrying is not the job's fault: it is thrown, so the dispatch effect is run
 * again (it sent nothing yet), instead of failing the job `secret_resolution` (a connection reset once did).
 */
export function throwIfTransient(thrown: unknown): void {
  if (isTransientDatabaseError(thrown)) throw thrown;
}

async function resolve(service: SecretService, allowed: LocalExecutionAllowed, target: ResolveTarget): Promise<DispatchSecrets> {
  const { db } = service;
  const environments = jobEnvironments(target.source, target.job);
  const { repository, workflow } = target.source;
  const scopes = applicableScopes(repository, environments);
  const references = secretReferencesOf(workflow);
  const readScopes = new Set([...scopes.map((s) => s.scope), ...references.flatMap((r) => referenceScopes(repository, r).map((s) => s.scope))]);
  const upstreams = succeededUpstreams(target.job);
  // Asked together: these reads are on the way of every dispatch.
  const [rows, testRun, outputs, runPublicKey] = await Promise.all([
    // Rows are read only from scopes known to hold some (usually none: no read at all).
    service.scopes.holding(readScopes).then((held) => secretsInScopes(db, held)),
    // Only a test run that brought a blob has one; other runs skip the read.
    target.source.testRunSecrets === true ? testRunSecretsOf(db, target.runId) : Promise.resolve(null),
    upstreams.length > 0 ? secretOutputsOf(db, target.runId, upstreams) : Promise.resolve([]),
    service.available ? service.runPublicKey(target.runId) : Promise.resolve(''),
  ]);
  const outputsExist = outputs.length > 0;
  if (!service.available) {
    if (rows.length > 0 || testRun || outputsExist || references.length > 0) throw new Error('secrets apply to this job but no master key is configured (SWITCHYARD_SECRET_KEY)');
    return { fields: {}, values: [] };
  }
  const rankOf = new Map(scopes.map((s) => [s.scope, s]));
  const flat: Record<string, { value: string; rank: number }> = {};
  const namespaced: Record<string, Record<string, { value: string; rank: number }>> = {};
  const opened = service.openRows(rows);
  for (const { scope, key, value } of opened) {
    const place = rankOf.get(scope);
    if (!place) continue;
    if ((flat[key]?.rank ?? -1) < place.rank) flat[key] = { value, rank: place.rank };
    if (place.environment !== null) {
      const ns = (namespaced[place.environment] ??= {});
      if ((ns[key]?.rank ?? -1) < place.rank) ns[key] = { value, rank: place.rank };
    }
  }
  const secrets = Object.fromEntries(Object.entries(flat).map(([k, v]) => [k, v.value]));
  const namespacedSecrets = Object.fromEntries(Object.entries(namespaced).map(([env, values]) => [env, Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.value]))]));
  if (outputsExist) {
    for (const output of await service.openSecretOutputs(target.runId, upstreams)) if (!(output.name in secrets)) secrets[output.name] = output.value;
  }
  if (testRun) await applyTestRunBlob(service, allowed, testRun, environments, { secrets, namespacedSecrets });
  const referenced = referencedFields(workflow, repository, opened);
  const values = [
    ...Object.values(secrets),
    ...Object.values(namespacedSecrets).flatMap((ns) => Object.values(ns)),
    ...(referenced.npmRegistries ?? []).map((registry) => registry.token),
    ...Object.values(referenced.installEnvSecrets ?? {}),
  ];
  return {
    fields: { ...(Object.keys(secrets).length > 0 && { secrets }), ...(Object.keys(namespacedSecrets).length > 0 && { namespacedSecrets }), ...referenced, runPublicKey },
    values,
  };
}

/** SEC-6: a test run's blob, decrypted now; only environments that allow local execution accept it. */
async function applyTestRunBlob(
  service: SecretService,
  allowed: LocalExecutionAllowed,
  testRun: NonNullable<Awaited<ReturnType<typeof testRunSecretsOf>>>,
  environments: readonly string[],
  into: { secrets: Record<string, string>; namespacedSecrets: Record<string, Record<string, string>> },
): Promise<void> {
  for (const environment of environments) {
    if (!(await allowed(environment))) throw new Error(`environment ${environment} does not allow local execution, so it takes no test-run secrets`);
  }
  const upload = await service.uploadKey(testRun.uploadId, false);
  if (!upload.ok) throw new Error(upload.reason);
  const blob = service.openTestBlob(upload.privateKeyDer, testRun.senderPublicKey, testRun.encryptedSecrets);
  Object.assign(into.secrets, blob.flat);
  for (const environment of environments) {
    const values = blob.contexts[environment];
    if (!values) continue;
    Object.assign(into.secrets, values);
    into.namespacedSecrets[environment] = { ...into.namespacedSecrets[environment], ...values };
  }
}
