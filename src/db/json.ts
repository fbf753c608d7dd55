/**
 * An escaped NUL (`\u0000`) or lone surrogate (`\ud800`..`\udfff`: JSON.stringify escapes a surrogate
 * only when it is unpaired), not itself preceded by an escaping backslash.
 */
const UNSTORABLE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/g;

/** A value JSON cannot hold: nested deeper than the serializer's stack, a BigInt, a cycle. */
export class UnstorableJsonError extends Error {
  override readonly name = 'UnstorableJsonError';
  constructor(readonly detail: string) {
    super(`not storable as JSON: ${detail}`);
  }
}

function describe(thrown: unknown): string {
  if (thrown instanceof RangeError && /call stack/i.test(thrown.message)) return `it is nested too deeply to serialize (${thrown.message})`;
  if (thrown instanceof Error && /BigInt/i.test(thrown.message)) return 'it holds a BigInt';
  if (thrown instanceof Error && /circular/i.test(thrown.message)) return 'it holds a cycle';
  return thrown instanceof Error ? thrown.message : String(thrown);
}

/**
 * JSON text for a json or jsonb value, made in one step. jsonb cannot hold U+0000 nor an unpaired
 * surrogate, and one such character (in a log line, a webhook payload) must not fail a write, so it
 * is stored as U+FFFD. `undefined` becomes `null`. Throws UnstorableJsonError.
 */
export function toJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (thrown) {
    throw new UnstorableJsonError(describe(thrown));
  }
  if (text === undefined) return 'null';
  return text.includes('\\u') ? text.replace(UNSTORABLE_ESCAPE, '$1\\ufffd') : text;
}
