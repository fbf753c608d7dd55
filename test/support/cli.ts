import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Variables that steer where a command looks for a coordinator; a test sets the ones it means. */
const TARGET_VARIABLES = ['SWITCHYARD_URL', 'HOST', 'PORT', 'SWITCHYARD_ADMIN_TOKEN', 'SWITCHYARD_DATA_DIR'];

/** `switchyard <argv>` as its own process, as an operator runs it; only `env` says where the coordinator is. */
export function runSwitchyard(argv: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<CliResult> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([key]) => !TARGET_VARIABLES.includes(key)));
  const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', ...argv], {
    cwd: ROOT,
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: timeoutMs,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
