import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { findFreePort } from '../../../src/db/free-port.ts';
import { runSwitchyard } from '../../support/cli.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { dropDatabase } from '../../support/fake-agent.ts';
import { after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

/** Regression: commands looked for the coordinator on port 8080 whatever PORT it was started with. */
describe('every command finds the coordinator as switchyard start binds it: HOST, PORT and the data dir token', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let dataDir: string;
  let port: string;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    dataDir = await tempDir('sy-cli-data-');
    port = String(await findFreePort());
    // No admin token configured: the coordinator generates one into its data dir, as at a first start.
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, HOST: '0.0.0.0', PORT: port, SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_ADMIN_TOKEN: '', SWITCHYARD_COORDINATOR_ID: 'coord-target' });
  });
  after(async () => {
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  it('runs, agents, diagnose and token list reach it with only the server\'s HOST, PORT and data dir', async () => {
    const env = { HOST: '0.0.0.0', PORT: port, SWITCHYARD_DATA_DIR: dataDir };
    const [runs, agents, diagnose, tokens] = await Promise.all([
      runSwitchyard(['runs'], env),
      runSwitchyard(['agents'], env),
      runSwitchyard(['diagnose'], env),
      runSwitchyard(['token', 'list'], env),
    ]);
    assert.deepEqual([runs.code, runs.stdout], [0, 'ID  #  REPOSITORY  WORKFLOW  REF  STATUS  DURATION  AGE  COMMIT\n'], runs.stderr);
    assert.deepEqual([agents.code, agents.stdout], [0, 'AGENT  LABELS  SLOTS  COORDINATOR  CONNECTED  STATE  JOBS\n'], agents.stderr);
    assert.equal(diagnose.code, 0, diagnose.stderr);
    assert.match(diagnose.stdout, /^coordinator coord-target: 0 agent\(s\) connected/);
    assert.equal(tokens.code, 0, tokens.stderr);
    assert.match(tokens.stdout, /^ID +PREFIX/);
  });

  it('SWITCHYARD_URL wins over HOST/PORT, and an unreachable one is named in the error', async () => {
    const elsewhere = await findFreePort();
    const env = { SWITCHYARD_URL: `http://127.0.0.1:${elsewhere}`, PORT: port, SWITCHYARD_DATA_DIR: dataDir };
    const result = await runSwitchyard(['diagnose'], env);
    assert.equal(result.code, 1);
    assert.match(result.stderr, new RegExp(`^switchyard diagnose: cannot reach the coordinator at http://127.0.0.1:${elsewhere} \\(.*ECONNREFUSED.*\\)`));
    const wrongPort = await runSwitchyard(['runs'], { PORT: String(elsewhere), SWITCHYARD_DATA_DIR: dataDir });
    assert.match(wrongPort.stderr, new RegExp(`cannot reach the coordinator at http://127.0.0.1:${elsewhere} `), 'the URL tried, not 8080');
  });

  it('a malformed variable or a data dir without a token is one line naming it, exit 1', async () => {
    const badPort = await runSwitchyard(['runs'], { PORT: 'eighty', SWITCHYARD_DATA_DIR: dataDir });
    assert.deepEqual([badPort.code, badPort.stderr], [1, 'switchyard runs: Invalid PORT: must be a whole number (got "eighty")\n']);
    const badUrl = await runSwitchyard(['agents'], { SWITCHYARD_URL: 'ws://x', SWITCHYARD_DATA_DIR: dataDir });
    assert.equal(badUrl.code, 1);
    assert.match(badUrl.stderr, /^switchyard agents: Invalid SWITCHYARD_URL: must be a URL starting with http:\/\/ or https:\/\/\n$/);
    const empty = await tempDir();
    const noToken = await runSwitchyard(['logs', 'x'], { PORT: port, SWITCHYARD_DATA_DIR: empty });
    assert.equal(noToken.code, 1);
    assert.ok(noToken.stderr.includes(join(empty, 'admin-token')), noToken.stderr);
  });
});
