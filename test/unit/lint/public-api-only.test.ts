import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

/**
 * The project's own lint configuration, run on a probe file as if it were in src/ (the rules under
 * test need no type information; a probe that is not on disk cannot have any).
 */
const eslint = new ESLint({ cwd: process.cwd(), overrideConfig: [{ files: ['**/*.ts'], ...tseslint.configs.disableTypeChecked }] });

async function problemsOf(code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: 'src/public-api-probe.ts' });
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-syntax' || m.ruleId === 'no-restricted-imports').map((m) => `${m.line}:${m.ruleId}`);
}

describe('lint: only the public API of each library (issue 48)', { timeout: 120_000 }, () => {
  it("refuses a library's underscore-prefixed members, through a cast, by name or by string", async () => {
    const problems = await problemsOf(
      [
        "import { createActor, createMachine } from 'xstate';",
        'const actor = createActor(createMachine({}));',
        'export const parent = actor._parent;',
        'export const stop = () => (actor as unknown as { _stop(): void })._stop();',
        "export const handle = (actor as unknown as Record<string, unknown>)['_handle'];",
        '',
      ].join('\n'),
    );
    assert.deepEqual(problems, ['3:no-restricted-syntax', '4:no-restricted-syntax', '5:no-restricted-syntax']);
  });

  it("refuses a file inside a package, imported or resolved; the lock file's _type and elkjs's documented bundle pass", async () => {
    const problems = await problemsOf(
      [
        "import { createRequire } from 'node:module';",
        "import type { WebSocket } from 'ws/lib/websocket.js';",
        'const require = createRequire(import.meta.url);',
        "export const constants = require.resolve('ws/lib/constants.js');",
        "export const elk = require.resolve('elkjs/lib/elk.bundled.js');",
        "export const kind = (job: { _type: string }) => job._type;",
        'export type Socket = WebSocket;',
        '',
      ].join('\n'),
    );
    assert.deepEqual(problems, ['2:no-restricted-imports', '4:no-restricted-syntax']);
  });
});
