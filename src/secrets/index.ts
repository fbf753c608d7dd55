import type { Kysely } from 'kysely';
import { LATE_MESSAGE_GRACE_MS } from '../../actors/agents/registry.ts';
import { coerceError } from '../../lib/errors.ts';
import type { CompiledConfig } from '../config/index.ts';
import type { Schema } from '../db/schema.ts';
import type { BuiltDispatch } from '../ws/dispatch-builder.ts';
import { describeIssues, dispatchSecretFieldsSchema } from '../ws/messages.ts';
import type { JobDispatch } from '../ws/messages.ts';
import { decryptWithKey, encryptWithKey } from './crypto.ts';
import type { MasterKeys } from './crypto.ts';
import { DispatchedSecrets } from './dispatched.ts';
import { masterKeysOf } from './key-file.ts';
import { SECRET_RESOLUTION, resolveDispatchSecrets, throwIfTransient } from './resolve.ts';
import type { LocalExecutionAllowed, ResolveTarget } from './resolve.ts';
import { SecretService } from './service.ts';

export interface Secrets {
  service: SecretService;
  /** Values sent to each attempt from this coordinator, for redaction (SEC-4). */
  dispatched: DispatchedSecrets;
  localExecutionAllowed: LocalExecutionAllowed;
  /** A dispatch for an agent on a peer coordinator: its secret fields sealed under the master key for the trip. */
  sealForPeer: (frame: object) => object;
  /** The peer's side: the dispatch as the agent gets it (or null when it cannot be opened here). */
  openFromPeer: (frame: object) => object | null;
}

/**
 * The secrets of one coordinator (docs/http-api.md#secrets). `localExecutionAllowed` answers for an
 * environment whether it accepts test-run secrets.
 */
export function createSecrets(deps: {
  config: CompiledConfig;
  db: Kysely<Schema>;
  now: () => number;
  localExecutionAllowed?: LocalExecutionAllowed;
  onStoreError?: (error: unknown) => void;
}): Secrets {
  const keys = masterKeysOf(deps.config);
  const service = new SecretService({ db: deps.db, keys, now: deps.now, actor: `coordinator:${deps.config.coordinatorId}` });
  const store = { load: (id: string) => service.attemptValues(id), drop: (id: string) => service.dropAttemptValues(id) };
  const dispatched = new DispatchedSecrets(LATE_MESSAGE_GRACE_MS, store, deps.onStoreError);
  return {
    service,
    dispatched,
    // Without an answer (tests of the secrets alone) no named environment takes test-run secrets.
    localExecutionAllowed: deps.localExecutionAllowed ?? (() => Promise.resolve(false)),
    sealForPeer: (frame) => sealSecretFields(keys, frame),
    openFromPeer: (frame) => {
      const opened = openSecretFields(keys, frame);
      const dispatch = opened as Partial<JobDispatch> | null;
      if (typeof dispatch?.jobId === 'string') dispatched.remember(dispatch.jobId, secretValuesOf(dispatch));
      return opened;
    },
  };
}

/**
 * SEC-2/SEC-3: the built dispatch with its secrets in the top-level fields only, the fields checked
 * against the agent's schema. A resolution failure fails the job (`secret_resolution`) like any
 * refused dispatch.
 */
export async function withSecrets(secrets: Secrets, built: BuiltDispatch, target: ResolveTarget): Promise<BuiltDispatch> {
  if (!built.ok || target.job.initFor !== null) return built;
  const resolved = await resolveDispatchSecrets(secrets.service, secrets.localExecutionAllowed, target);
  if (!resolved.ok) return resolved;
  // The dispatch was checked as it was built; only what resolution adds is checked here.
  const parsed = dispatchSecretFieldsSchema.safeParse(resolved.fields);
  if (!parsed.success) return { ok: false, reason: `${SECRET_RESOLUTION}: the dispatch with its secrets is invalid (${describeIssues(parsed.error)})` };
  if (resolved.values.length > 0) {
    try {
      await secrets.service.saveAttemptValues(target.dispatchId, target.runId, resolved.values);
    } catch (thrown) {
      throwIfTransient(thrown);
      return { ok: false, reason: `${SECRET_RESOLUTION}: the attempt's values could not be kept for redaction (${coerceError(thrown).message})` };
    }
  }
  secrets.dispatched.remember(target.dispatchId, resolved.values);
  return { ok: true, dispatch: { ...built.dispatch, ...parsed.data } };
}

const SEALED_FIELD = 'sealedSecrets';
const SECRET_FIELDS = ['secrets', 'namespacedSecrets'] as const;

function secretValuesOf(frame: Partial<JobDispatch>): string[] {
  return [...Object.values(frame.secrets ?? {}), ...Object.values(frame.namespacedSecrets ?? {}).flatMap((ns) => Object.values(ns))];
}

function sealSecretFields(keys: MasterKeys | null, frame: object): object {
  const fields = frame as Record<string, unknown>;
  if (!SECRET_FIELDS.some((f) => f in fields)) return frame;
  if (!keys) throw new Error('a dispatch with secrets cannot go to a peer without a master key');
  const rest = Object.fromEntries(Object.entries(fields).filter(([k]) => !(SECRET_FIELDS as readonly string[]).includes(k)));
  const secret = Object.fromEntries(SECRET_FIELDS.filter((f) => f in fields).map((f) => [f, fields[f]]));
  return { ...rest, [SEALED_FIELD]: encryptWithKey(keys.current, JSON.stringify(secret), `peer-frame:${String(fields['jobId'])}`) };
}

function openSecretFields(keys: MasterKeys | null, frame: object): object | null {
  const fields = frame as Record<string, unknown>;
  const sealed = fields[SEALED_FIELD];
  if (typeof sealed !== 'string') return frame;
  if (!keys) return null;
  const aad = `peer-frame:${String(fields['jobId'])}`;
  for (const key of [keys.current, ...(keys.old ? [keys.old] : [])]) {
    try {
      const secret = JSON.parse(decryptWithKey(key, sealed, aad).toString('utf8')) as Record<string, unknown>;
      const { [SEALED_FIELD]: _sealed, ...rest } = fields;
      return { ...rest, ...secret };
    } catch {
      continue;
    }
  }
  return null;
}
