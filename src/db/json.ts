/** An escaped NUL (`\u0000`) not itself preceded by an escaping backslash. */
const ESCAPED_NUL = /(?<!\\)((?:\\\\)*)\\u0000/g;

/**
 * JSON text for a jsonb parameter. jsonb cannot hold U+0000, and one such character (say, in a log
 * line) must not fail a whole group commit, so it is stored as U+FFFD. `undefined` becomes `null`.
 */
export function toJson(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.includes('\\u0000') ? text.replace(ESCAPED_NUL, '$1\\ufffd') : text;
}

