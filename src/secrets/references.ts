import type { Kysely } from 'kysely';
import type { LockWorkflow } from '../../machines/lock.types.ts';
import { secretsInScopes } from '../db/secrets.ts';
import type { Schema } from '../db/schema.ts';
import { applicableScopes } from './scopes.ts';

/** A lock file's `<environment>:<secret>`: the secret `key` as a job in `environment` of the run's repository sees it. */
export interface SecretReference {
  text: string;
  environment: string;
  key: string;
}

/** Every reference a workflow makes: its registries' tokens and its install environment (docs/lockfile.md#workflows). */
export function secretReferencesOf(workflow: LockWorkflow): SecretReference[] {
  const texts = [...(workflow.registries ?? []).map((registry) => registry.tokenSecret), ...(workflow.installEnv ?? [])];
  return texts.map(parseReference);
}

/** `<environment>:<secret>`; the environment may be empty (`:KEY`), then only the repository-wide scopes apply. */
export function parseReference(text: string): SecretReference {
  const colon = text.lastIndexOf(':');
  return colon < 0 ? { text, environment: '', key: text } : { text, environment: text.slice(0, colon), key: text.slice(colon + 1) };
}

/** The scopes a reference reads, narrowest last (the narrowest holding the key wins). */
export function referenceScopes(repository: string, reference: SecretReference): { scope: string; rank: number }[] {
  return applicableScopes(repository, reference.environment === '' ? [] : [reference.environment]);
}

/**
 * SEC-2 at run creation: the references no stored secret answers, as "<environment>:<secret>".
 * Only names are read; nothing is decrypted.
 */
export async function unresolvedReferences(db: Kysely<Schema>, repository: string, workflow: LockWorkflow): Promise<string[]> {
  const references = secretReferencesOf(workflow);
  if (references.length === 0) return [];
  const scopes = [...new Set(references.flatMap((reference) => referenceScopes(repository, reference).map((s) => s.scope)))];
  const stored = new Set((await secretsInScopes(db, scopes)).map((row) => `${row.scope}\u0000${row.key}`));
  return references
    .filter((reference) => !referenceScopes(repository, reference).some((s) => stored.has(`${s.scope}\u0000${reference.key}`)))
    .map((reference) => reference.text);
}

/** What the dispatch carries for the references: `npmRegistries` and `installEnvSecrets` (docs/protocol.md#jobdispatch). */
export interface ReferencedFields {
  npmRegistries?: { url: string; scope?: string; alwaysAuth: boolean; token: string }[];
  installEnvSecrets?: Record<string, string>;
}

/**
 * SEC-2 at dispatch: each reference's value from the opened rows (the narrowest scope holding the key
 * wins); a reference nothing answers throws, so the job fails `secret_resolution`, never runs without it.
 */
export function referencedFields(workflow: LockWorkflow, repository: string, opened: readonly { scope: string; key: string; value: string }[]): ReferencedFields {
  const valueOf = (text: string): string => {
    const reference = parseReference(text);
    const scopes = referenceScopes(repository, reference);
    for (const { scope } of [...scopes].reverse()) {
      const row = opened.find((candidate) => candidate.scope === scope && candidate.key === reference.key);
      if (row) return row.value;
    }
    throw new Error(`the secret ${text} the workflow references is not stored in any scope of ${repository}`);
  };
  const registries = workflow.registries ?? [];
  const installEnv = workflow.installEnv ?? [];
  return {
    ...(registries.length > 0 && {
      npmRegistries: registries.map((r) => ({ url: r.url, ...(r.scope !== undefined && { scope: r.scope }), alwaysAuth: r.alwaysAuth ?? false, token: valueOf(r.tokenSecret) })),
    }),
    ...(installEnv.length > 0 && { installEnvSecrets: Object.fromEntries(installEnv.map((text) => [parseReference(text).key, valueOf(text)])) }),
  };
}
