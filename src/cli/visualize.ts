import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { VISUALIZER, offlineDataScript } from '../../visualize/assets.ts';
import type { RunArchive } from '../replay/archive.ts';
import { ReplayJournalError, ReplayVersionError } from '../replay/errors.ts';
import { ArchiveRequestError } from '../replay/archive.ts';
import { CliUsageError, failureExit, openArchive } from './replay.ts';
import type { CommandIo } from './replay.ts';

const USAGE = `usage: switchyard visualize --out <dir> --run <runId> [--url <url>] [--force]

Writes a static copy of the visualizer for one run into <dir>: the page, its scripts, the machine
graphs, the run's history and its replay, all embedded so that <dir>/index.html opens from file://
without a server.

options:
  --out <dir>   where to write (created if missing)
  --run <id>    the run to export
  --url <url>   read from a running coordinator instead of the database (see 'switchyard replay --help')
  --force       include a replay even when the run was recorded by another chart version

exit status: 0 written, 2 bad usage, 3 cannot read the run
`;

function parseArguments(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      strict: true,
      options: {
        out: { type: 'string' },
        run: { type: 'string' },
        url: { type: 'string' },
        force: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (thrown) {
    throw new CliUsageError(thrown instanceof Error ? thrown.message : String(thrown), { cause: thrown });
  }
}

/** A replay that cannot be made (another chart version) still leaves a usable copy, with the reason. */
async function replayOrReason(archive: RunArchive, runId: string, force: boolean) {
  try {
    return { replay: await archive.replay(runId, { force }), replayError: null };
  } catch (thrown) {
    const expected = thrown instanceof ReplayVersionError || thrown instanceof ReplayJournalError || (thrown instanceof ArchiveRequestError && thrown.status === 409);
    if (!expected) throw thrown;
    return { replay: null, replayError: thrown.message };
  }
}

/** Everything the page shows for one run, read once. */
export async function offlineData(archive: RunArchive, runId: string, force: boolean, now: number): Promise<Record<string, unknown>> {
  const [run, history, machines] = await Promise.all([archive.run(runId), archive.history(runId), archive.machines()]);
  return { exportedAt: now, runId, machines, run, history, ...(await replayOrReason(archive, runId, force)) };
}

/** Writes the page, its assets and `data.js` (the embedded data) into `dir`. */
export async function writeOfflineCopy(dir: string, data: Record<string, unknown>): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const written: string[] = [];
  for (const [name, asset] of Object.entries(VISUALIZER.files)) {
    await copyFile(asset.path, join(dir, name));
    written.push(name);
  }
  await writeFile(join(dir, 'data.js'), offlineDataScript(data));
  return [...written, 'data.js'];
}

async function visualize(argv: string[], env: NodeJS.ProcessEnv, io: CommandIo): Promise<number> {
  const { values } = parseArguments(argv);
  if (values.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  if (!values.out) throw new CliUsageError('--out <dir> is required');
  if (!values.run) throw new CliUsageError('--run <runId> is required');
  const opened = await openArchive(values.url, env);
  let data;
  try {
    data = await offlineData(opened.archive, values.run, values.force === true, Date.now());
  } finally {
    await opened.close();
  }
  const dir = resolve(values.out);
  const files = await writeOfflineCopy(dir, data);
  io.stdout.write(`${join(dir, 'index.html')}\n`);
  io.stderr.write(`wrote ${files.length} files for run ${values.run} into ${dir}${data['replay'] ? '' : ` (no replay: ${String(data['replayError'])})`}\n`);
  return 0;
}

/** `switchyard visualize --out <dir> --run <runId> [--url <url>]`. */
export async function runVisualizeCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  io: CommandIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  try {
    return await visualize(argv, env, io);
  } catch (thrown) {
    return failureExit(thrown, 'visualize', USAGE, io);
  }
}
