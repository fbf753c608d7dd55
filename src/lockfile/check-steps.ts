import type { LockSequentialStep, LockStep } from '../../machines/lock.types.ts';
import type { LockProblem } from './errors.ts';

const RUN_ONLY_FIELDS = ['shell', 'env', 'workingDirectory'] as const;

/** The `run` extension rules (docs/lockfile.md#steps-and-the-run-extension, rule 8) over a job's steps, parallel children included. */
export function stepsProblem(steps: readonly LockStep[], path: readonly PropertyKey[]): LockProblem | null {
  for (const [index, step] of steps.entries()) {
    if (step.kind === 'parallel') {
      for (const [childIndex, child] of step.children.entries()) {
        const problem = stepProblem(child, [...path, index, 'children', childIndex]);
        if (problem !== null) return problem;
      }
    } else {
      const problem = stepProblem(step, [...path, index]);
      if (problem !== null) return problem;
    }
  }
  return null;
}

function stepProblem(step: LockSequentialStep, path: readonly PropertyKey[]): LockProblem | null {
  const at = (field: string, problem: string): LockProblem => ({ path: [...path, field], problem, rule: 'run_step' });
  if (step.run === undefined) {
    const orphan = RUN_ONLY_FIELDS.find((field) => step[field] !== undefined);
    return orphan === undefined ? null : at(orphan, `\`${orphan}\` is only valid next to \`run\``);
  }
  if (step.run.trim() === '') return at('run', '`run` must be a non-empty command');
  if (step.shell !== undefined && !isValidShell(step.shell)) {
    return at('shell', `\`shell\` must be "bash", "sh" or an absolute path, not ${JSON.stringify(step.shell)}`);
  }
  const directory = step.workingDirectory;
  if (directory !== undefined && isAbsolute(directory)) {
    return at('workingDirectory', '`workingDirectory` must be relative to the checkout root');
  }
  if (directory?.split(/[\\/]/).includes('..')) {
    return at('workingDirectory', '`workingDirectory` must not contain a `..` segment');
  }
  return null;
}

function isValidShell(shell: string): boolean {
  return shell === 'bash' || shell === 'sh' || (shell.startsWith('/') && shell.length > 1);
}

function isAbsolute(directory: string): boolean {
  return directory.startsWith('/') || directory.startsWith('\\') || /^[A-Za-z]:/.test(directory);
}
