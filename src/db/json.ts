/**
 * An escaped NUL (`\u0000`) or lone surrogate (`\ud800`..`\udfff`: JSON.stringify escapes a surrogate
 * only when it is unpaired), not itself preceded by an escaping backslash.
 */
const UNSTORABLE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/g;

/**
 * JSON text for a jsonb parameter. jsonb cannot hold U+0000 nor an unpaired surrogate, and one such
 * character (say, in a log line or a webhook payload) must not fail a whole group commit, so it is
 * stored as U+FFFD. `undefined` becomes `null`.
 */
export function toJson(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.includes('\\u') ? text.replace(UNSTORABLE_ESCAPE, '$1\\ufffd') : text;
}
