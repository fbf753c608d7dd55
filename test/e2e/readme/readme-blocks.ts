import { readFile } from 'node:fs/promises';

/** One ```sh block of the README, with the line it starts on. */
export interface ShellBlock {
  line: number;
  text: string;
}

export async function readmeShellBlocks(path: string): Promise<ShellBlock[]> {
  const lines = (await readFile(path, 'utf8')).split('\n');
  const blocks: ShellBlock[] = [];
  let open: { line: number; body: string[] } | null = null;
  lines.forEach((line, index) => {
    if (open === null && line.trim() === '```sh') open = { line: index + 1, body: [] };
    else if (open !== null && line.trim() === '```') {
      blocks.push({ line: open.line, text: open.body.join('\n') });
      open = null;
    } else open?.body.push(line);
  });
  return blocks;
}

/** What the README test does with a block: run it (after `rewrite`, checked by `expect`), or why it cannot. */
export type BlockPlan =
  | { kind: 'run'; rewrite?: (text: string) => string; waitBefore?: 'walkthrough run'; expect?: RegExp[] }
  | { kind: 'start' }
  | { kind: 'excused'; why: string };

/**
 * Every README block, by its first line: a new block is neither run nor excused until it is listed
 * here, so the README cannot drift from what works.
 */
export const BLOCK_PLANS: readonly { firstLine: string; plan: BlockPlan }[] = [
  { firstLine: 'npm install --prefix ~/.local/node24', plan: { kind: 'excused', why: 'installs Node; .ci/run installs each Node line it tests the same way (install_node)' } },
  { firstLine: 'npm install && npm start', plan: { kind: 'start' } },
  {
    firstLine: 'TOKEN=$(cat .switchyard/admin-token)\ncurl -s localhost:8080/readyz',
    plan: { kind: 'run', expect: [/"ready":true/, /hello from /, /^run \S+ ended: success$/m, /^run \S+ {2}success {2}#1$/m, /"events":\[\{/] },
  },
  { firstLine: 'npm install\nGITHUB_WEBHOOK_SECRET=walkthrough-secret npm start', plan: { kind: 'start' } },
  { firstLine: 'TOKEN=$(cat .switchyard/admin-token)\nREPO=$(mktemp -d)', plan: { kind: 'run', expect: [/"name":"acme\/hello"/, /"accepted":true/] } },
  {
    firstLine: 'npm run -s switchyard -- runs ',
    plan: { kind: 'run', waitBefore: 'walkthrough run', expect: [/^ID +# +REPOSITORY/m, /tests pass$/m, /ended: success$/m, /bare-metal/] },
  },
  {
    firstLine: 'AGENT_TOKEN=$(npm run -s switchyard -- token create --labels linux)',
    plan: {
      kind: 'run',
      // The agent runs until stopped: here until `switchyard agents` lists it, then it is stopped, npm,
      // its shell and the agent alike (killing the background job alone left the agent running).
      rewrite: (text) =>
        text.replace(
          /^(npm run -s switchyard -- agent .*)$/m,
          '{ $1; } >agent.log 2>&1 & AGENT_PID=$!\nfor i in $(seq 100); do npm run -s switchyard -- agents | grep -q linux && break; sleep 0.3; done\nnpm run -s switchyard -- agents; kill $AGENT_PID; pkill -f -- "$AGENT_TOKEN" || true',
        ),
      expect: [/^\S+ +\S*linux\S* +\d+\/\d+ /m],
    },
  },
  { firstLine: 'AGENT_TOKEN=$(npm run -s switchyard -- token create --labels lab,kici', plan: { kind: 'excused', why: 'needs a stock KiCI agent built from its source (test/e2e/kici runs one where it is built)' } },
  { firstLine: "SWITCHYARD_SCALERS='[{\"type\":\"bare-metal\",\"name\":\"bare-metal\"},", plan: { kind: 'excused', why: 'needs a stock KiCI agent built from its source (test/e2e/kici runs one where it is built)' } },
  {
    firstLine: 'curl -s -X POST localhost:8080/api/v1/repositories -H "authorization: Bearer $TOKEN" \\\n  -d \'{"name":"acme/app","provider":"local"',
    plan: { kind: 'run', rewrite: (text) => text.replace('/srv/git/acme-app', "'\"$REPO\"'"), expect: [/"name":"acme\/app"/] },
  },
  { firstLine: 'curl -s -X POST localhost:8080/api/v1/repositories -H "authorization: Bearer $TOKEN" \\\n  -d \'{"name":"acme/app","provider":"github"', plan: { kind: 'excused', why: 'needs a GitHub token and GitHub' } },
  { firstLine: '# store (the scope may also be percent-encoded', plan: { kind: 'run', expect: [/DB_PASSWORD/, /"rotated"/] } },
  { firstLine: 'npm test  ', plan: { kind: 'excused', why: 'the test suite itself, which runs this test' } },
  { firstLine: 'npm run bench ', plan: { kind: 'excused', why: 'benchmarks and chaos take minutes each; the bench smoke tests run them in short form' } },
];

export function planOf(block: ShellBlock): BlockPlan | null {
  return BLOCK_PLANS.find((entry) => block.text.startsWith(entry.firstLine))?.plan ?? null;
}
