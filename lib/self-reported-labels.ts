/** The self-reported labels of docs/protocol.md#labels-executors-and-matching (role labels are left out: this agent runs no init jobs). */
export function autoLabels(host: string, platform: NodeJS.Platform = process.platform, arch: string = process.arch): string[] {
  const os: Record<string, string[]> = { darwin: ['macos', 'darwin'], win32: ['windows', 'win32'] };
  const archs: Record<string, string[]> = { x64: ['x64', 'amd64'] };
  return [
    ...(os[platform] ?? [platform]).map((name) => `kici:os:${name}`),
    ...(archs[arch] ?? [arch]).map((name) => `kici:arch:${name}`),
    `kici:host:${host}`,
  ];
}
