import type { JobDispatch } from '../ws/messages.ts';

/** Values shorter than this are not masked: they would blank out ordinary words. */
export const MIN_MASKED_LENGTH = 4;
export const MASK = '***';

/** Replaces every known secret value in a line with `***`, longest value first. */
export class SecretMasker {
  private readonly values: string[];

  constructor(values: Iterable<string>) {
    const unique = new Set<string>();
    for (const value of values) {
      // A multi-line secret is masked line by line, since logs arrive as lines.
      for (const part of [value, ...value.split(/\r?\n/)]) {
        if (part.length >= MIN_MASKED_LENGTH) unique.add(part);
      }
    }
    this.values = [...unique].sort((a, b) => b.length - a.length);
  }

  mask(line: string): string {
    let masked = line;
    for (const value of this.values) {
      if (masked.includes(value)) masked = masked.split(value).join(MASK);
    }
    return masked;
  }
}

/** Every secret a dispatch carries: `secrets`, `namespacedSecrets` and the credentials. */
export function dispatchSecretValues(dispatch: JobDispatch): string[] {
  const values: string[] = [];
  values.push(...Object.values(dispatch.secrets ?? {}));
  for (const namespace of Object.values(dispatch.namespacedSecrets ?? {})) values.push(...Object.values(namespace));
  values.push(...Object.values(dispatch.installEnvSecrets ?? {}));
  for (const registry of dispatch.npmRegistries ?? []) values.push(registry.token);
  for (const auth of [dispatch.sourceAuth, dispatch.workflowAuth]) if (auth) values.push(auth.secret);
  if (dispatch.token !== undefined) values.push(dispatch.token);
  return values;
}
