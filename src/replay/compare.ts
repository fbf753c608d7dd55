import type { PersistedMachineSnapshot } from '../../machines/projection.ts';

/** One place where two JSON values differ: `path` like `context.jobs.build.status`. */
export interface JsonDifference {
  path: string;
  expected: unknown;
  actual: unknown;
}

const MAX_DIFFERENCES = 20;

/** The value as stored JSON sees it: undefined properties gone, key order irrelevant. */
export function asJson(value: unknown): unknown {
  return value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

/** The leaf paths where `expected` and `actual` differ (first MAX_DIFFERENCES), comparing as JSON. */
export function diffJson(expected: unknown, actual: unknown, path = ''): JsonDifference[] {
  const out: JsonDifference[] = [];
  walk(asJson(expected), asJson(actual), path, out);
  return out;
}

function walk(expected: unknown, actual: unknown, path: string, out: JsonDifference[]): void {
  if (out.length >= MAX_DIFFERENCES) return;
  if (Array.isArray(expected) && Array.isArray(actual)) {
    if (expected.length !== actual.length) {
      out.push({ path: join(path, 'length'), expected: expected.length, actual: actual.length });
    }
    const shared = Math.min(expected.length, actual.length);
    for (let i = 0; i < shared; i++) walk(expected[i], actual[i], join(path, i), out);
    return;
  }
  if (isObject(expected) && isObject(actual)) {
    const keys = new Set([...Object.keys(expected), ...Object.keys(actual)]);
    for (const key of [...keys].sort()) walk(expected[key], actual[key], join(path, key), out);
    return;
  }
  if (!Object.is(expected, actual)) out.push({ path: path || '(root)', expected, actual });
}

/** What replay compares of a run snapshot: status, value, context and each child's (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption). */
export function comparableSnapshot(snapshot: PersistedMachineSnapshot<unknown>): unknown {
  const children: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(snapshot.children ?? {})) {
    children[key] = { src: child.src, status: child.snapshot.status, value: child.snapshot.value, context: child.snapshot.context };
  }
  return { status: snapshot.status, value: snapshot.value, context: snapshot.context, children };
}
