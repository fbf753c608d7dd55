/** What a redacted value or token becomes. */
export const MASK = '***';

/** Secret values shorter than this are left alone: they would blank out ordinary words (SEC-4). */
export const MIN_SECRET_LENGTH = 4;

/** Variable names whose values are always masked (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with). */
export const SENSITIVE_NAME = /TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL/i;

const AGENT_TOKEN = /kat_[0-9a-fA-F]{64}/g;
/** The signature of a signed blob URL (docs/blobs.md#signed-urls), which the stock agent prints when it downloads. */
const URL_SIGNATURE = /([?&]signature=)[0-9a-f]{64}/g;
/** The value of any query parameter whose name holds "token" or "signature" (`?token=`, `&access_token=`, a signed blob URL's `&signature=`). */
const QUERY_TOKEN = /([?&;][^=&#;?]*(?:token|signature)[^=&#;?]*=)[^&#;]*/gi;
/** Admin API tokens (`sya_…`), wherever they appear. */
const ADMIN_TOKEN = /sya_[A-Za-z0-9_-]*/g;
const MAY_HOLD_TOKEN = /token|signature|sya_|kat_/i;

export interface EnvVar {
  name: string;
  value: string;
  category?: string;
}

/**
 * A function masking `secrets` (longest first, so a secret containing another is masked whole),
 * any agent token and the signature of any signed blob URL. A multi-line secret is also masked line by line, since logs arrive as lines.
 * Compile once per job when redacting many lines.
 */
export function compileRedactor(secrets: readonly string[]): (text: string) => string {
  const values = new Set<string>();
  for (const secret of secrets) {
    for (const part of [secret, ...secret.split(/\r?\n/)]) {
      if (part.length >= MIN_SECRET_LENGTH) values.add(part);
    }
  }
  const ordered = [...values].sort((a, b) => b.length - a.length);
  return (text) => {
    let masked = text;
    for (const value of ordered) {
      if (masked.includes(value)) masked = masked.split(value).join(MASK);
    }
    return masked.replace(AGENT_TOKEN, MASK).replace(URL_SIGNATURE, `$1${MASK}`);
  };
}

/** `text` with every secret value (length ≥ 4) and every `kat_` token replaced by `***`. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  return compileRedactor(secrets)(text);
}

/**
 * Environment variables safe to store or show: the whole value is masked when the name looks
 * sensitive, otherwise known secrets and agent tokens inside it are.
 */
export function redactEnvVars<T extends EnvVar>(vars: readonly T[], secrets: readonly string[]): T[] {
  const redact = compileRedactor(secrets);
  return vars.map((variable) => ({
    ...variable,
    value: SENSITIVE_NAME.test(variable.name) ? MASK : redact(variable.value),
  }));
}

/**
 * `text` (a URL, a request target, a message) with token query values and `sya_` / `kat_` tokens
 * replaced by `***`, so it can be logged: `/ws/observe?token=sya_abc&runId=r` → `/ws/observe?token=***&runId=r`.
 */
export function redactTokens(text: string): string {
  if (!MAY_HOLD_TOKEN.test(text)) return text;
  return text.replace(QUERY_TOKEN, `$1${MASK}`).replace(ADMIN_TOKEN, MASK).replace(AGENT_TOKEN, MASK);
}

/** `value` with `redact` applied to every string in it, however deep (keys are kept). */
export function redactDeep(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === 'string') return redact(value);
  if (Array.isArray(value)) return value.map((item) => redactDeep(item, redact));
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v, redact)]));
  return value;
}
