import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const NFT_TABLE = ['ip', 'switchyard'] as const;
export const NFT_CHAIN = 'forward';

/** Private and link-local ranges an isolated agent may not reach (SCL-12), in the order they are appended. */
export const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'] as const;

/** Which traffic the rules are about: one agent's source address. */
export interface IsolationMatch {
  sourceIp: string;
  /** Written as the rule comment so the rules can be found and removed again. */
  agentId: string;
}

export interface IsolationPolicy {
  /** CIDRs (or addresses) the agent may reach besides the gateway. */
  allowlist: string[];
  /** Drop everything else too, not only the private ranges. */
  denyAll: boolean;
}

export interface RuleOp {
  verb: 'insert' | 'add';
  tokens: string[];
}

export class IsolationRuleError extends Error {
  override readonly name = 'IsolationRuleError';
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const AGENT_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function checkAddress(value: string, what: string, cidr: boolean): string {
  const [address = '', prefix, extra] = value.split('/');
  const prefixOk = prefix === undefined || (cidr && /^\d{1,2}$/.test(prefix) && Number(prefix) <= 32);
  if (!IPV4.test(address) || !prefixOk || extra !== undefined) throw new IsolationRuleError(`${what} is not an IPv4 ${cidr ? 'address or CIDR' : 'address'}: ${value}`);
  return value;
}

/**
 * The nftables rules that isolate one agent (SCL-12, docs/requirements.md), as ops for table
 * `ip switchyard`, chain `forward`. The chain is shared and first-match-wins, and the host may
 * already hold wildcard drops, so accepts are inserted at the head and drops appended at the tail.
 */
export function buildIsolationRuleOps(match: IsolationMatch, gatewayIp: string, policy: IsolationPolicy): RuleOp[] {
  const source = checkAddress(match.sourceIp, 'source', false);
  const gateway = checkAddress(gatewayIp, 'gateway', false);
  if (!AGENT_ID.test(match.agentId)) throw new IsolationRuleError(`agent id cannot be used in a rule comment: ${match.agentId}`);
  const allowed = policy.allowlist.map((cidr) => checkAddress(cidr, 'allowlist entry', true));
  const rule = (daddr: string | null, verdict: 'accept' | 'drop'): string[] => [
    'rule',
    ...NFT_TABLE,
    NFT_CHAIN,
    'ip',
    'saddr',
    source,
    ...(daddr === null ? [] : ['ip', 'daddr', daddr]),
    'comment',
    `"switchyard:${match.agentId}"`,
    verdict,
  ];
  const accepts: RuleOp[] = [gateway, ...allowed].map((daddr) => ({ verb: 'insert', tokens: rule(daddr, 'accept') }));
  const drops: RuleOp[] = PRIVATE_RANGES.map((range) => ({ verb: 'add', tokens: rule(range, 'drop') }));
  if (policy.denyAll) drops.push({ verb: 'add', tokens: rule(null, 'drop') });
  return [...accepts, ...drops];
}

/** Table and chain, created if missing (`add` of an existing table or chain is a no-op in nft). */
export function baseOps(): RuleOp[] {
  return [
    { verb: 'add', tokens: ['table', ...NFT_TABLE] },
    { verb: 'add', tokens: ['chain', ...NFT_TABLE, NFT_CHAIN, '{', 'type', 'filter', 'hook', 'forward', 'priority', '0', ';', '}'] },
  ];
}

export type NftRunner = (args: string[]) => Promise<string>;

export const runNft: NftRunner = async (args) => (await run('nft', args, { timeout: 10_000 })).stdout;

/** True when `nft` is installed and may change the ruleset here. */
export async function nftAvailable(runner: NftRunner = runNft): Promise<boolean> {
  return runner(['list', 'tables']).then(
    () => true,
    () => false,
  );
}

export async function applyIsolationRules(ops: RuleOp[], runner: NftRunner = runNft): Promise<void> {
  for (const op of [...baseOps(), ...ops]) await runner([op.verb, ...op.tokens]);
}

/** Deletes every rule carrying this agent's comment. */
export async function removeIsolationRules(agentId: string, runner: NftRunner = runNft): Promise<number> {
  const listing = await runner(['-a', 'list', 'chain', ...NFT_TABLE, NFT_CHAIN]).catch(() => '');
  const handles = listing
    .split('\n')
    .filter((line) => line.includes(`"switchyard:${agentId}"`))
    .map((line) => /# handle (\d+)/.exec(line)?.[1])
    .filter((handle): handle is string => handle !== undefined);
  for (const handle of handles) await runner(['delete', 'rule', ...NFT_TABLE, NFT_CHAIN, 'handle', handle]);
  return handles.length;
}
