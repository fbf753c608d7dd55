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
const BINARIES = ['/usr/bin/node', '/usr/bin/git', '/bin/sh', '/bin/dash', '/bin/cat', '/bin/echo', '/bin/ls', '/usr/bin/env', '/bin/sleep', '/usr/bin/test', '/bin/hostname', '/usr/bin/id', '/bin/true'];

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

/** Why this machine cannot run the container tests, or null when it can. */
export function containerEngineUnavailable(): string | null {
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

/** A minimal image: the host's node, git and a shell with their shared libraries, imported with `podman import`. */
function buildImage(): string {
  const present = BINARIES.filter((b) => existsSync(b));
  const key = createHash('sha256').update(present.map((b) => `${b}:${statSync(b).size}:${statSync(b).mtimeMs}`).join('\n')).digest('hex').slice(0, 12);
  const image = `localhost/switchyard-test-agent:${key}`;
  const known = execFileSync('podman', ['images', '--format', '{{.Repository}}:{{.Tag}}'], { encoding: 'utf8' });
  if (known.split('\n').includes(image)) return image;
  const rootfs = join(CACHE, 'rootfs');
  rmSync(rootfs, { recursive: true, force: true });
  for (const dir of ['tmp', 'etc', 'proc', 'sys', 'dev', 'root']) mkdirSync(join(rootfs, dir), { recursive: true });
  for (const file of new Set(present.flatMap((b) => [b, ...libsOf(b)]))) {
    mkdirSync(join(rootfs, dirname(file)), { recursive: true });
    copyFileSync(file, join(rootfs, file));
  }
  if (!existsSync(join(rootfs, 'bin/sh'))) symlinkSync('dash', join(rootfs, 'bin/sh'));
  for (const file of ['/etc/passwd', '/etc/group', '/etc/hosts', '/etc/nsswitch.conf']) if (existsSync(file)) copyFileSync(file, join(rootfs, file));
  const tarball = join(CACHE, `rootfs-${key}.tar`);
  execFileSync('tar', ['-C', rootfs, '-cf', tarball, '.']);
  execFileSync('podman', ['import', tarball, image], { stdio: 'ignore' });
  rmSync(rootfs, { recursive: true, force: true });
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

