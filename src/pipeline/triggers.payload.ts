import { isDeepStrictEqual } from 'node:util';
import { TriggerPatternError } from './triggers.patterns.ts';

/** The value at `keys` inside a payload, or undefined when any step is missing. */
export function valueAt(root: unknown, keys: readonly (string | number)[]): unknown {
  return keys.reduce<unknown>((node, key) => child(node, key), root);
}

export function stringAt(root: unknown, keys: readonly (string | number)[]): string | undefined {
  const value = valueAt(root, keys);
  return typeof value === 'string' ? value : undefined;
}

function child(node: unknown, key: string | number): unknown {
  if (Array.isArray(node)) {
    const list: readonly unknown[] = node;
    return typeof key === 'number' ? list[key] : undefined;
  }
  if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) return undefined;
  return (node as Record<string | number, unknown>)[key];
}

const SEGMENT = /^(?:\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\[\s*'([^']*)'\s*\]|\[\s*"([^"]*)"\s*\])/;

/** A JSONPath of names and indices: `$.a.b`, `$.items[0].id`, `$['a b']`; `a.b` means `$.a.b`. */
export function parseJsonPath(path: string): (string | number)[] {
  let rest = path.startsWith('$') ? path.slice(1) : `.${path}`;
  const segments: (string | number)[] = [];
  while (rest.length > 0) {
    const token = SEGMENT.exec(rest);
    if (token === null) throw new TriggerPatternError(path, 'unsupported JSONPath (names and indices only)');
    const [whole, name, index, single, double] = token;
    segments.push(index !== undefined ? Number(index) : (name ?? single ?? double ?? ''));
    rest = rest.slice(whole.length);
  }
  return segments;
}

/** `match`: every path holds its expected value; `not`: none does (deep equality). */
export function payloadMatches(
  payload: unknown,
  match: Record<string, unknown> | undefined,
  not: Record<string, unknown> | undefined,
): boolean {
  const holds = ([path, expected]: [string, unknown]) => isDeepStrictEqual(valueAt(payload, parseJsonPath(path)), expected);
  return Object.entries(match ?? {}).every(holds) && !Object.entries(not ?? {}).some(holds);
}
