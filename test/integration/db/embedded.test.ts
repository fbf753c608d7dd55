import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { openDatabase } from '../../../src/db/database.ts';
import { DataDirInUseError, EmbeddedPostgresStartError } from '../../../src/db/errors.ts';
import { isProcessAlive, waitForExit } from '../../../src/db/process-liveness.ts';
import { tempDir, testLog } from '../../support/database.ts';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];
const signalListenersAtLoad = SIGNALS.map((s) => process.listenerCount(s));

const open = (dataDir: string) => openDatabase({ dataDir, databaseUrl: undefined }, testLog);

async function portOf(dataDir: string): Promise<number> {
  const state = JSON.parse(await readFile(join(dataDir, 'postgres.json'), 'utf8')) as { port: number };
  return state.port;
}

/** Starts a child that opens the embedded database, runs `whileRunning`, then SIGKILLs the child. */
async function crashAfterOpening(dataDir: string, whileRunning: (childPid: number) => Promise<void>): Promise<number> {
  const script = fileURLToPath(new URL('./open-embedded.child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, dataDir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const postmasterPid = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /ready (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', (code) => reject(new Error(`child exited early (${code}): ${out}`)));
  });
  try {
    await whileRunning(child.pid ?? 0);
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
  }
  return postmasterPid;
}

describe('embedded Postgres', () => {
  it('refuses a second start on a data dir in use, and the first keeps working', async () => {
    const dataDir = await tempDir();
    const first = await open(dataDir);
    try {
      await assert.rejects(open(dataDir), (error: unknown) => {
        assert.ok(error instanceof DataDirInUseError);
        assert.equal(error.ownerPid, process.pid);
        assert.match(error.message, new RegExp(`${dataDir} is in use by another Switchyard process \\(pid ${process.pid}\\)`));
        return true;
      });
      await claimCoordinatorLease(first.db, { id: 'a', ttlMs: 1, now: 0 });
    } finally {
      await first.close();
    }
  });

  it('as root, refuses a data dir under a folder the postgres user cannot enter, saying what to do', { skip: process.getuid?.() === 0 ? false : 'only root runs Postgres as another user' }, async () => {
    const home = await tempDir('sy-home-'); // mode 0700, as a root's home folder is
    const dataDir = join(home, 'checkout', '.switchyard');
    await assert.rejects(open(dataDir), (error: unknown) => {
      assert.ok(error instanceof EmbeddedPostgresStartError, String(error));
      assert.match(error.message, new RegExp(`cannot enter ${home} \\(no execute permission for others\\): run 'chmod o\\+x ${home}', or set SWITCHYARD_DATA_DIR`));
      return true;
    });
    await chmod(home, 0o755);
    const opened = await open(dataDir);
    await opened.close();
  });

  it('leaves signal handling to the coordinator: no SIGINT/SIGTERM/SIGHUP listener is added', async () => {
    const database = await open(await tempDir());
    try {
      assert.deepEqual(SIGNALS.map((s) => process.listenerCount(s)), signalListenersAtLoad);
    } finally {
      await database.close();
    }
  });

  it('keeps data and port across restarts, and starts warm without initialising again', async () => {
    const dataDir = await tempDir();
    const first = await open(dataDir);
    assert.equal(first.kind, 'embedded');
    await claimCoordinatorLease(first.db, { id: 'a', ttlMs: 1, now: 0 });
    await first.close();
    const port = await portOf(dataDir);
    assert.notEqual(port, 5432);

    const second = await open(dataDir);
    try {
      assert.equal(await portOf(dataDir), port);
      const { epoch } = await claimCoordinatorLease(second.db, { id: 'a', ttlMs: 1, now: 1 });
      assert.equal(epoch, 2, 'the lease row survived the restart');
    } finally {
      await second.close();
    }
  });

  it('takes over a lock left by a dead process', async () => {
    const dataDir = await tempDir();
    const lockPath = join(dataDir, 'switchyard.lock');
    await (await open(dataDir)).close();
    const deadPid = 2 ** 22 + 7;
    assert.equal(isProcessAlive(deadPid), false);
    await writeFile(lockPath, JSON.stringify({ pid: deadPid }));
    const database = await open(dataDir);
    try {
      const holder = JSON.parse(await readFile(lockPath, 'utf8')) as { pid: number };
      assert.equal(holder.pid, process.pid, 'the lock now names this process');
      const { epoch } = await claimCoordinatorLease(database.db, { id: 'a', ttlMs: 1, now: 0 });
      assert.equal(epoch, 1, 'the database opened on the taken-over lock works');
    } finally {
      await database.close();
    }
    await assert.rejects(readFile(lockPath), { code: 'ENOENT' }, 'closing released the lock');
  });

  it('refuses to start while another process runs on the data dir; after it is killed, stops its leftover server and starts on the same data', async () => {
    const dataDir = await tempDir();
    const leftover = await crashAfterOpening(dataDir, async (childPid) => {
      await assert.rejects(open(dataDir), (error: unknown) => error instanceof DataDirInUseError && error.ownerPid === childPid);
    });
    assert.ok(isProcessAlive(leftover), 'the killed process left its postgres running');
    const database = await open(dataDir);
    try {
      assert.ok(await waitForExit(leftover, 1_000), 'the leftover server was stopped');
      const { epoch } = await claimCoordinatorLease(database.db, { id: 'child', ttlMs: 1, now: 1 });
      assert.equal(epoch, 2, 'data written before the crash is there');
    } finally {
      await database.close();
    }
  });
});
