import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventually } from './runtime.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Gitignored: the rootfs tarball is rebuilt only when the host binaries change. */
const CACHE = join(ROOT, 'test-artifacts', 'scaler-image');
/** Host binaries copied into the image at the same path; the Node running the tests goes in as /usr/bin/node. */
const BINARIES = ['/usr/bin/git', '/bin/sh', '/bin/dash', '/bin/cat', '/bin/echo', '/bin/ls', '/usr/bin/env', '/bin/sleep', '/usr/bin/test', '/bin/hostname', '/usr/bin/id', '/bin/true'];
/** Where the image has the test run's own Node (`process.execPath`). */
export const IMAGE_NODE = '/usr/bin/node';

export interface ContainerEngine {
  socketPath: string;
  image: string;
  stop(): Promise<void>;
}

function which(command: string): string | null {
  try {
    return execFileSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/**
 * Why this machine cannot run the container tests, or null when it can. Under CI=true a missing
 * runtime throws instead: CI installs podman and runc (.ci/run), so the backend is never skipped there.
 */
export function containerEngineUnavailable(): string | null {
  const reason = whyUnavailable();
  if (reason !== null && process.env.CI === 'true') throw new Error(`${reason} (CI=true: failing instead of skipping the container tests)`);
  return reason;
}

function whyUnavailable(): string | null {
  if (process.platform !== 'linux') return 'containers need Linux';
  if (!which('podman')) return 'podman is not installed (apt-get install -y podman runc); the container backend was not run against a real engine';
  if (!which('runc')) return 'runc is not installed (apt-get install -y runc)';
  try {
    execFileSync('podman', ['--runtime', 'runc', 'info'], { stdio: 'ignore', timeout: 60_000 });
  } catch (error) {
    return `podman cannot run here: ${String(error).slice(0, 300)}`;
  }
  return null;
}

function libsOf(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/(\/[^\s]+\.so[^\s]*)/g)].map((m) => m[1] as string);
}

/** A minimal image: the test run's node, the host's git and a shell with their shared libraries, imported with `podman import`. */
function buildImage(): string {
  const files = new Map<string, string>([[IMAGE_NODE, process.execPath], ...BINARIES.filter((b) => existsSync(b)).map((b): [string, string] => [b, b])]);
  const key = createHash('sha256')
    .update([...files].map(([at, from]) => `${at}<-${from}:${statSync(from).size}:${statSync(from).mtimeMs}`).join('\n'))
    .digest('hex')
    .slice(0, 12);
  const image = `localhost/switchyard-test-agent:${key}`;
  const known = execFileSync('podman', ['images', '--format', '{{.Repository}}:{{.Tag}}'], { encoding: 'utf8' });
  if (known.split('\n').includes(image)) return image;
  const rootfs = join(CACHE, 'rootfs');
  rmSync(rootfs, { recursive: true, force: true });
  for (const dir of ['tmp', 'etc', 'proc', 'sys', 'dev', 'root']) mkdirSync(join(rootfs, dir), { recursive: true });
  const libraries = new Set([...files.values()].flatMap(libsOf));
  for (const [at, from] of [...files, ...[...libraries].map((l): [string, string] => [l, l])]) {
    mkdirSync(join(rootfs, dirname(at)), { recursive: true });
    copyFileSync(from, join(rootfs, at));
  }
  if (!existsSync(join(rootfs, 'bin/sh'))) symlinkSync('dash', join(rootfs, 'bin/sh'));
  for (const file of ['/etc/passwd', '/etc/group', '/etc/hosts', '/etc/nsswitch.conf']) if (existsSync(file)) copyFileSync(file, join(rootfs, file));
  const tarball = join(CACHE, `rootfs-${key}.tar`);
  execFileSync('tar', ['-C', rootfs, '-cf', tarball, '.']);
  execFileSync('podman', ['import', tarball, image], { stdio: 'ignore' });
  rmSync(rootfs, { recursive: true, force: true });
  rmSync(tarball, { force: true });
  return image;
}

/** `podman system service` on a private socket (the Docker API), with runc as the runtime. */
export async function startContainerEngine(): Promise<ContainerEngine> {
  mkdirSync(CACHE, { recursive: true });
  const image = buildImage();
  const socketPath = `/tmp/sy-podman-${process.pid}.sock`;
  rmSync(socketPath, { force: true });
  const child: ChildProcess = spawn('podman', ['--runtime', 'runc', 'system', 'service', '--time=0', `unix://${socketPath}`], { stdio: 'ignore' });
  await eventually(() => existsSync(socketPath), 30_000, 'the podman API socket');
  return {
    socketPath,
    image,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
      rmSync(socketPath, { force: true });
    },
  };
}

