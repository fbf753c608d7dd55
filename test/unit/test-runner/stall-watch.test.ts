import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { StallWatch } from '../../stall-watch.ts';

describe('the test runner’s stall watch', () => {
  it('kills the process of a file that sends no event for the silence, and says so; an ended file is left alone', async () => {
    const stuck = join(process.cwd(), 'test-artifacts/stall-probe/stuck.test.ts');
    const ended = join(process.cwd(), 'test-artifacts/stall-probe/ended.test.ts');
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', stuck], { stdio: 'ignore' });
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', ended], { stdio: 'ignore' });
    const exit = (c: typeof child) => new Promise<NodeJS.Signals | null>((resolve) => c.once('exit', (_code, signal) => resolve(signal)));
    const killed = exit(child);
    const reports: string[] = [];
    const watch = new StallWatch(300, (message) => reports.push(message));
    try {
      watch.saw({ type: 'test:enqueue', data: { file: stuck } });
      watch.saw({ type: 'test:enqueue', data: { file: ended } });
      watch.saw({ type: 'test:summary', data: { file: ended } });
      assert.equal(await killed, 'SIGKILL');
      assert.equal(reports.length, 1);
      assert.match(reports[0] ?? '', new RegExp(`^test-artifacts/stall-probe/stuck\\.test\\.ts: no test event for \\d+ s; its process ${child.pid} is killed`));
      assert.equal(other.exitCode, null, 'the ended file’s process was not touched');
    } finally {
      watch.stop();
      other.kill('SIGKILL');
    }
  });
});
