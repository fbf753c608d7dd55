import picomatch from 'picomatch';
import type { LockPattern } from '../../machines/lock.types.ts';
import { coerceError } from '../../lib/errors.ts';
import { isReDoSProne } from '../lockfile/redos.ts';

/**
 * A trigger pattern cannot be evaluated (a regex that does not compile or is ReDoS-prone, an
 * unsupported JSONPath, changed files missing). Only the workflow that owns the trigger fails.
 */
export class TriggerPatternError extends Error {
  override readonly name = 'TriggerPatternError';

  constructor(
    readonly pattern: string,
    readonly problem: string,
  ) {
    super(`trigger pattern ${JSON.stringify(pattern)}: ${problem}`);
  }
}

type Test = (value: string) => boolean;

/** Compiled globs and regexes; lock files repeat the same few patterns across deliveries. */
const compiled = new Map<string, Test>();
const MAX_COMPILED = 2_000;

function cached(key: string, compile: () => Test): Test {
  let test = compiled.get(key);
  if (test === undefined) {
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    test = compile();
    compiled.set(key, test);
  }
  return test;
}

/** Picomatch semantics with `dot: true`. */
export function glob(pattern: string): Test {
  return cached(`glob:${pattern}`, () => {
    try {
      return picomatch(pattern, { dot: true });
    } catch (thrown) {
      throw new TriggerPatternError(pattern, coerceError(thrown).message);
    }
  });
}

function regex(source: string, flags: string | undefined): Test {
  return cached(`regex:${flags ?? ''}:${source}`, () => {
    if (isReDoSProne(source)) throw new TriggerPatternError(source, 'regex is ReDoS-prone (star height > 1)');
    let compiledRegex: RegExp;
    try {
      compiledRegex = new RegExp(source, flags);
    } catch (thrown) {
      throw new TriggerPatternError(source, coerceError(thrown).message);
    }
    return (value) => {
      compiledRegex.lastIndex = 0;
      return compiledRegex.test(value);
    };
  });
}

export function matchesPattern(pattern: LockPattern, value: string): boolean {
  return pattern.type === 'glob' ? glob(pattern.pattern)(value) : regex(pattern.pattern, pattern.flags)(value);
}

/** An empty list allows any value; otherwise some pattern must match a present value. */
export function anyPatternMatches(patterns: readonly LockPattern[], value: string | undefined): boolean {
  if (patterns.length === 0) return true;
  return value !== undefined && patterns.some((pattern) => matchesPattern(pattern, value));
}

/** An empty list allows any value; otherwise the value must be present and listed. */
export function listAllows(list: readonly string[] | undefined, value: string | undefined): boolean {
  if (list === undefined || list.length === 0) return true;
  return value !== undefined && list.includes(value);
}

/**
 * docs/lockfile.md#triggers Paths: `!` exclusions are removed first; if nothing remains there is no match; a
 * list of only exclusions matches whatever remains. Non-empty `paths` with no changed files never match.
 */
export function pathsMatch(paths: readonly string[], changedFiles: readonly string[] | undefined): boolean {
  if (paths.length === 0) return true;
  if (changedFiles === undefined) {
    throw new TriggerPatternError(paths.join(', '), 'changed files were not computed for a trigger with paths');
  }
  const excludes = paths.filter((path) => path.startsWith('!')).map((path) => glob(path.slice(1)));
  const includes = paths.filter((path) => !path.startsWith('!')).map((path) => glob(path));
  const remaining = changedFiles.filter((file) => !excludes.some((excluded) => excluded(file)));
  if (remaining.length === 0) return false;
  return includes.length === 0 || remaining.some((file) => includes.some((included) => included(file)));
}

/** docs/lockfile.md#triggers Repos: exclusions first; non-empty `repos` with no `sourceRepo` fails. */
export function reposMatch(repos: readonly LockPattern[] | undefined, sourceRepo: string | undefined): boolean {
  if (repos === undefined || repos.length === 0) return true;
  if (sourceRepo === undefined) return false;
  const excludes = repos.filter((repo) => repo.pattern.startsWith('!'));
  const includes = repos.filter((repo) => !repo.pattern.startsWith('!'));
  if (excludes.some((repo) => matchesPattern({ ...repo, pattern: repo.pattern.slice(1) }, sourceRepo))) return false;
  return includes.length === 0 || includes.some((repo) => matchesPattern(repo, sourceRepo));
}
