import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseLockFile } from '../../../src/lockfile/parse.ts';
import type { LockCorruptRule, LockFileParseError } from '../../../src/lockfile/errors.ts';
import type { LockFile } from '../../../machines/lock.types.ts';

const beside = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared');
export const SHARED = existsSync(beside) ? beside : '/work/shared';
export const FIXTURES = join(SHARED, 'fixtures/kici-lockfiles');

/** The hand-written example of lockfile.md §9, read from the spec itself. */
export function specExampleText(): string {
  const spec = readFileSync(join(SHARED, 'spec/lockfile.md'), 'utf8');
  const section = spec.slice(spec.indexOf('## 9. Example'));
  const block = /```json\n([\s\S]*?)```/.exec(section);
  assert.ok(block?.[1], 'lockfile.md §9 has a json block');
  return block[1];
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A path into a JSON document and the value to put there (`undefined` deletes the key). */
export type Edit = [path: (string | number)[], value: Json | undefined];

/** The §9 example with `edits` applied in order, the way a broken generator would write it. */
export function exampleWith(...edits: Edit[]): unknown {
  const document: unknown = JSON.parse(specExampleText());
  for (const [path, value] of edits) {
    const parent = path.slice(0, -1).reduce<unknown>((node, key) => child(node, key), document);
    assign(parent, path[path.length - 1]!, value);
  }
  return document;
}

function isRecord(node: unknown): node is Record<string, unknown> {
  return typeof node === 'object' && node !== null && !Array.isArray(node);
}

function child(node: unknown, key: string | number): unknown {
  if (Array.isArray(node) && typeof key === 'number') return (node as unknown[])[key];
  if (isRecord(node) && typeof key === 'string') return node[key];
  throw new Error(`no ${String(key)} in the document`);
}

function assign(node: unknown, key: string | number, value: Json | undefined): void {
  if (Array.isArray(node) && typeof key === 'number') {
    const list: unknown[] = node;
    if (value === undefined) list.splice(key, 1);
    else list[key] = value;
  } else if (isRecord(node) && typeof key === 'string') {
    if (value === undefined) delete node[key];
    else node[key] = value;
  } else {
    throw new Error(`cannot set ${String(key)}`);
  }
}

export function expectValid(document: unknown): LockFile {
  const result = parseLockFile(JSON.stringify(document));
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  return result.lock;
}

/** Parses `document` and asserts the first problem: its JSON path, rule and a part of its message. */
export function expectCorrupt(
  document: unknown,
  expected: { path: string; rule: LockCorruptRule; problem: RegExp | string },
): LockFileParseError {
  const input = typeof document === 'string' || Buffer.isBuffer(document) ? document : JSON.stringify(document);
  const result = parseLockFile(input);
  assert.equal(result.ok, false, 'expected the lock file to be corrupt');
  if (result.ok) throw new Error('unreachable');
  const { error } = result;
  assert.equal(error.name, 'LockFileParseError');
  assert.equal(error.path, expected.path, error.message);
  assert.equal(error.rule, expected.rule, error.message);
  if (typeof expected.problem === 'string') assert.ok(error.problem.includes(expected.problem), error.problem);
  else assert.match(error.problem, expected.problem);
  assert.ok(error.message.includes(expected.path) && error.message.includes(error.problem));
  return error;
}
