import type { LockPattern, LockTrigger } from '../../machines/lock.types.ts';
import type { LabelMatcher } from '../../machines/types.ts';
import { coerceError } from '../../lib/errors.ts';
import type { LockProblem } from './errors.ts';
import { isReDoSProne } from './redos.ts';

/** Why a regex is refused (it does not compile, or it is ReDoS-prone), or null. */
export function regexProblem(source: string, flags: string | undefined): string | null {
  try {
    void new RegExp(source, flags);
  } catch (thrown) {
    return `regex ${JSON.stringify(source)} does not compile: ${coerceError(thrown).message}`;
  }
  if (isReDoSProne(source)) {
    return `regex ${JSON.stringify(source)} is ReDoS-prone: a repeated group contains a repeat (star height > 1)`;
  }
  return null;
}

/** Regex patterns of one trigger: branch, tag and repo patterns and `bodyMatch` (rule 5). */
export function triggerRegexProblem(trigger: LockTrigger, path: readonly PropertyKey[]): LockProblem | null {
  for (const [field, patterns] of patternLists(trigger)) {
    for (const [index, pattern] of (patterns ?? []).entries()) {
      const problem = patternProblem(pattern, field === 'repos');
      if (problem !== null) return { path: [...path, field, index, 'pattern'], problem, rule: 'regex' };
    }
  }
  if (trigger._type === 'comment' && trigger.bodyMatch !== undefined) {
    const problem = patternProblem(trigger.bodyMatch, false);
    if (problem !== null) return { path: [...path, 'bodyMatch', 'pattern'], problem, rule: 'regex' };
  }
  return null;
}

/** Regex label matchers of `runsOn`, `excludeLabels` or one `runsOnAll` list (rule 5). */
export function matcherRegexProblem(
  matchers: readonly LabelMatcher[] | undefined,
  path: readonly PropertyKey[],
): LockProblem | null {
  for (const [index, matcher] of (matchers ?? []).entries()) {
    if (matcher.kind !== 'regex') continue;
    const problem = regexProblem(matcher.source, matcher.flags);
    if (problem !== null) return { path: [...path, index, 'source'], problem, rule: 'regex' };
  }
  return null;
}

function patternProblem(pattern: LockPattern, exclusionAllowed: boolean): string | null {
  if (pattern.type !== 'regex') return null;
  const source = exclusionAllowed && pattern.pattern.startsWith('!') ? pattern.pattern.slice(1) : pattern.pattern;
  return regexProblem(source, pattern.flags);
}

type PatternField = 'branches' | 'patterns' | 'targetBranches' | 'sourceBranches' | 'repos';

function patternLists(trigger: LockTrigger): [PatternField, LockPattern[] | undefined][] {
  switch (trigger._type) {
    case 'push':
      return [['branches', trigger.branches], ['repos', trigger.repos]];
    case 'tag':
    case 'create':
    case 'delete':
      return [['patterns', trigger.patterns], ['repos', trigger.repos]];
    case 'pr':
      return [
        ['targetBranches', trigger.targetBranches],
        ['sourceBranches', trigger.sourceBranches],
        ['repos', trigger.repos],
      ];
    case 'generic_webhook':
    case 'schedule':
    case 'kici_event':
    case 'workflow_complete':
    case 'job_complete':
    case 'lifecycle':
      return [];
    default:
      return [['repos', trigger.repos]];
  }
}
