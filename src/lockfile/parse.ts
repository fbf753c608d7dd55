import type { z } from 'zod';
import type { LockFile } from '../../machines/lock.types.ts';
import { coerceError } from '../../lib/errors.ts';
import { findSemanticProblem } from './checks.ts';
import { LockFileParseError } from './errors.ts';
import type { LockProblem } from './errors.ts';
import { formatJsonPath } from './json-path.ts';
import { lockFileSchema } from './schema.ts';

/** Lock files above this size are corrupt, for every provider (docs/lockfile.md#where-the-file-is-read). */
export const MAX_LOCK_FILE_BYTES = 5 * 1024 * 1024;

/** The only lock file schema Switchyard reads. */
export const SUPPORTED_SCHEMA_VERSION = 29;

export type LockParseResult = { ok: true; lock: LockFile } | { ok: false; error: LockFileParseError };

const RECOMPILE = 'recompile with `kici compile`';

/**
 * Validates a `.kici/kici.lock.json` against docs/lockfile.md#what-counts-as-corrupt and returns the lock file, or the first
 * problem with its JSON path. Never throws.
 */
export function parseLockFile(input: string | Buffer): LockParseResult {
  const json = readJson(input);
  if ('problem' in json) return failure(json.problem);
  const versionProblem = schemaVersionProblem(json.value);
  if (versionProblem !== null) return failure(versionProblem);
  const parsed = lockFileSchema.safeParse(json.value, { reportInput: true });
  if (!parsed.success) return failure(issueProblem(parsed.error.issues[0]));
  const semanticProblem = findSemanticProblem(parsed.data);
  if (semanticProblem !== null) return failure(semanticProblem);
  return { ok: true, lock: parsed.data };
}

function failure(problem: LockProblem): LockParseResult {
  return { ok: false, error: new LockFileParseError(formatJsonPath(problem.path), problem.problem, problem.rule) };
}

function fileProblem(problem: string): { problem: LockProblem } {
  return { problem: { path: [], problem, rule: 'file' } };
}

function readJson(input: string | Buffer): { value: unknown } | { problem: LockProblem } {
  const bytes = typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.length;
  if (bytes > MAX_LOCK_FILE_BYTES) {
    return fileProblem(`lock file is ${bytes} bytes, over the ${MAX_LOCK_FILE_BYTES}-byte (5 MiB) limit`);
  }
  const text = (typeof input === 'string' ? input : input.toString('utf8')).replace(/^\uFEFF/, '');
  if (text.trim() === '') return fileProblem('lock file is empty');
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (thrown) {
    return fileProblem(`lock file is not valid JSON: ${coerceError(thrown).message}`);
  }
}

function schemaVersionProblem(value: unknown): LockProblem | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { path: [], problem: 'a lock file must be a JSON object', rule: 'structure' };
  }
  const at = (problem: string): LockProblem => ({ path: ['schemaVersion'], problem, rule: 'schema_version' });
  if (!('schemaVersion' in value) || value.schemaVersion === undefined) {
    return at(`schemaVersion is missing; ${RECOMPILE}`);
  }
  const version = value.schemaVersion;
  if (typeof version !== 'number') {
    return at(`schemaVersion must be a number, found ${JSON.stringify(version)}; ${RECOMPILE}`);
  }
  if (version !== SUPPORTED_SCHEMA_VERSION) {
    return at(`schemaVersion ${version} is not supported (Switchyard reads ${SUPPORTED_SCHEMA_VERSION}); ${RECOMPILE}`);
  }
  return null;
}

const LABEL_FIELDS = new Set<PropertyKey>(['runsOn', 'excludeLabels', 'runsOnAll']);
const RUN_FIELDS = new Set<PropertyKey>(['run', 'shell', 'env', 'workingDirectory']);

function issueProblem(issue: z.core.$ZodIssue | undefined): LockProblem {
  if (issue === undefined) return { path: [], problem: 'the lock file does not match the schema', rule: 'structure' };
  const path = issue.path;
  const stepsAt = path.indexOf('steps');
  const rule =
    path.some((segment) => LABEL_FIELDS.has(segment))
      ? 'label_matcher'
      : stepsAt !== -1 && path.slice(stepsAt).some((segment) => RUN_FIELDS.has(segment))
        ? 'run_step'
        : 'structure';
  return { path, problem: describeIssue(issue), rule };
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const last = issue.path[issue.path.length - 1];
  if (issue.code === 'invalid_type' && issue.input === undefined && typeof last === 'string') {
    return `missing required field \`${last}\` (expected ${issue.expected})`;
  }
  return issue.message.replace(/^Invalid input: /, '');
}
