import { createHmac, randomUUID } from 'node:crypto';
import { lockFileWith, pushWorkflow, runJob } from '../support/lock-repo.ts';
import { pushPayload } from '../support/webhooks.ts';

export const SECRET = 'corpus-webhook-secret';
export const GENERIC_SOURCE = 'corpus-hmac';
export const GENERIC_SECRET = 'corpus-generic-secret';
/** A label no agent of this test has: good runs are created and wait, nothing is dispatched. */
export const NOBODY = 'corpus-label-nobody-has';
const MiB = 1024 * 1024;
const DEEP = 100_000;

/** One HTTP request as it goes on the wire; the path may be anything the client will send. */
export interface Wire {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Sends Content-Length: n and no body (the cap must be enforced before reading it). */
  declaredLength?: number;
  /** Streams this many bytes with chunked encoding (no Content-Length to trust). */
  streamBytes?: number;
}

/** What an accepted (2xx) delivery is recorded as once the intake has processed it. */
export interface Processing {
  status: 'processed' | 'ignored' | 'retrying' | 'dead';
  /** Matched against `outcome.reason` (ignored) or `last_error` (retrying, dead). */
  detail?: RegExp;
}

export interface HttpCase {
  name: string;
  wire: (goodSha: string) => Wire;
  status: number;
  /** `error` of the JSON answer. */
  error?: string;
  /** `reason` of the JSON answer. */
  reason?: RegExp;
  processing?: Processing;
  /** The one run the delivery started: its status, and text its stored input summary must hold. */
  run?: { status: RegExp; summary?: RegExp };
  /** A known server bug: the case states the right answer and is reported as todo until fixed. */
  todo?: string;
  /** Why a connection reset is an accepted answer too (a known race, reported). */
  resetAllowed?: string;
}

export function hmac(secret: string, body: Buffer, algorithm = 'sha256'): string {
  return createHmac(algorithm, secret).update(body).digest('hex');
}

interface GithubOptions {
  event?: string | null;
  delivery?: string | null;
  signature?: string | null;
}

/** A GitHub delivery: signed over the exact bytes unless told otherwise; null leaves a header out. */
export function github(body: Buffer | string, options: GithubOptions = {}): Wire {
  const bytes = Buffer.from(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const event = options.event === undefined ? 'push' : options.event;
  const delivery = options.delivery === undefined ? `bad-${randomUUID()}` : options.delivery;
  const signature = options.signature === undefined ? `sha256=${hmac(SECRET, bytes)}` : options.signature;
  if (event !== null) headers['x-github-event'] = event;
  if (delivery !== null) headers['x-github-delivery'] = delivery;
  if (signature !== null) headers['x-hub-signature-256'] = signature;
  return { method: 'POST', path: '/webhooks/github', headers, body: bytes };
}

const push = (sha: string, extra: object = {}) => JSON.stringify({ ...pushPayload(sha), ...extra });
/** The good push with raw JSON text spliced in as one more top-level field. */
const pushWithField = (sha: string, name: string, json: string) => push(sha).replace(/}$/, `,${JSON.stringify(name)}:${json}}`);
const nested = (open: string, close: string, core = '') => open.repeat(DEEP) + core + close.repeat(DEEP);
const malformed = { status: 400, error: 'malformed body' };
const badSignature = { status: 401, error: 'invalid signature', reason: /^signature does not match$/ };
const notAnObject = { status: 'ignored', detail: /^malformed push: the body is not a JSON object$/ } as const;
const ignored = (detail: RegExp): Processing => ({ status: 'ignored', detail });

export const WEBHOOK_CASES: HttpCase[] = [
  // Malformed JSON, correctly signed: refused before it is stored.
  { name: 'malformed JSON: truncated object', wire: () => github('{"ref":"refs/heads/main","after":'), ...malformed, reason: /JSON/ },
  { name: 'malformed JSON: trailing garbage after a good push', wire: (sha) => github(`${push(sha)}}trailing`), ...malformed, reason: /JSON/ },
  { name: 'malformed JSON: empty body', wire: () => github(''), ...malformed, reason: /JSON/ },
  { name: 'malformed JSON: single-quoted keys', wire: () => github("{'ref': 'refs/heads/main'}"), ...malformed, reason: /JSON/ },
  { name: 'malformed JSON: NaN literal', wire: () => github('{"ref": NaN}'), ...malformed, reason: /JSON/ },
  // Valid JSON that is not a push object: accepted, then ignored with a reason.
  { name: 'JSON null', wire: () => github('null'), status: 202, processing: notAnObject },
  { name: 'a bare JSON string', wire: () => github('"refs/heads/main"'), status: 202, processing: notAnObject },
  { name: 'a bare JSON array', wire: () => github('[]'), status: 202, processing: notAnObject },
  // Wrong types inside a push.
  { name: 'repository is a number', wire: (sha) => github(push(sha, { repository: 42 })), status: 202, processing: ignored(/^malformed push: \$\.repository: Invalid input: expected object, received number$/) },
  { name: 'ref is an array', wire: (sha) => github(push(sha, { ref: ['refs/heads/main'] })), status: 202, processing: ignored(/^malformed push: \$\.ref: Invalid input: expected string, received array$/) },
  { name: 'after is a number', wire: (sha) => github(push(sha, { after: 7 })), status: 202, processing: ignored(/^malformed push: \$\.after: Invalid input: expected string, received number$/) },
  { name: 'deleted is a string', wire: (sha) => github(push(sha, { deleted: 'yes' })), status: 202, processing: ignored(/^malformed push: \$\.deleted: Invalid input: expected boolean, received string$/) },
  { name: 'repository.full_name is empty', wire: (sha) => github(push(sha, { repository: { full_name: '' } })), status: 202, processing: ignored(/^malformed push: \$\.repository\.full_name: /) },
  // Normalization reads no commits for a branch push without path filters: the run starts.
  { name: 'commits is an object (not read without path filters)', wire: (sha) => github(push(sha, { commits: { a: 1 } })), status: 202, processing: { status: 'processed' } },
  {
    name: 'after is not a commit id (dead at once: it can never be read)',
    wire: (sha) => github(push(sha, { after: 'not-a-sha; rm -rf /' })),
    status: 202,
    processing: { status: 'dead', detail: /"not-a-sha; rm -rf \/" is not a commit id/ },
  },
  { name: 'a ref that is neither branch nor tag', wire: (sha) => github(push(sha, { ref: 'refs/notes/commits' })), status: 202, processing: ignored(/^push to refs\/notes\/commits is neither a branch nor a tag$/) },
  { name: 'a repository that is not registered', wire: (sha) => github(JSON.stringify(pushPayload(sha, 'evil/other'))), status: 202, processing: ignored(/^repository evil\/other is not registered$/) },
  // Size.
  { name: 'Content-Length over the 25 MiB cap, body never sent', wire: () => ({ ...github(''), body: undefined, declaredLength: 26 * MiB }), status: 413, error: 'payload too large' },
  {
    name: '26 MiB streamed without Content-Length',
    wire: () => ({ ...github(''), body: undefined, streamBytes: 26 * MiB }),
    status: 413,
    error: 'payload too large',
    resetAllowed: 'readBody leaves its for-await early, which destroys the socket: the 413 races a TCP reset',
  },
  { name: 'a 20 KiB delivery header (over the HTTP header limit)', wire: (sha) => github(push(sha), { delivery: 'd'.repeat(20 * 1024) }), status: 431 },
  // Depth: V8 parses 100 000 levels; nothing may recurse over them.
  { name: '100 000 nested arrays as the body', wire: () => github(nested('[', ']')), status: 202, processing: notAnObject },
  { name: '100 000 nested objects as the body', wire: () => github(nested('{"a":', '}', '1')), status: 202, processing: ignored(/^malformed push: \$\.repository: /) },
  // Encoding.
  { name: 'invalid UTF-8 bytes in a string', wire: (sha) => github(Buffer.concat([Buffer.from(push(sha).slice(0, -1) + ',"x":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')])), ...malformed, reason: /utf-8/i },
  { name: 'a truncated UTF-8 sequence at the end', wire: () => github(Buffer.concat([Buffer.from('{"x":"'), Buffer.from([0xe2, 0x82])])), ...malformed, reason: /utf-8/i },
  { name: 'a lone surrogate escape in a good push', wire: (sha) => github(pushWithField(sha, 'note', '"\\ud800"')), status: 202, processing: { status: 'processed' } },
  { name: 'an escaped NUL in a good push', wire: (sha) => github(pushWithField(sha, 'note', '"nul\\u0000here"')), status: 202, processing: { status: 'processed' } },
  { name: 'a UTF-8 BOM before a good push', wire: (sha) => github(`\uFEFF${push(sha)}`), status: 202, processing: { status: 'processed' } },
  // Signatures.
  { name: 'no signature header', wire: (sha) => github(push(sha), { signature: null }), ...badSignature },
  { name: 'an empty signature', wire: (sha) => github(push(sha), { signature: '' }), ...badSignature },
  { name: 'sha256= of all zeros', wire: (sha) => github(push(sha), { signature: `sha256=${'0'.repeat(64)}` }), ...badSignature },
  { name: 'a valid sha1= signature (only sha256 counts)', wire: (sha) => github(push(sha), { signature: `sha1=${hmac(SECRET, Buffer.from(push(sha)), 'sha1')}` }), ...badSignature },
  { name: 'the signature of a different body', wire: (sha) => github(push(sha), { signature: `sha256=${hmac(SECRET, Buffer.from(push(sha, { ref: 'refs/heads/x' })))}` }), ...badSignature },
  { name: 'signed with the wrong secret', wire: (sha) => github(push(sha), { signature: `sha256=${hmac('not-the-secret', Buffer.from(push(sha)))}` }), ...badSignature },
  { name: 'sha256= followed by non-hex text', wire: (sha) => github(push(sha), { signature: `sha256=${'zz'.repeat(32)}` }), ...badSignature },
  { name: 'the right digest without the sha256= prefix', wire: (sha) => github(push(sha), { signature: hmac(SECRET, Buffer.from(push(sha))) }), ...badSignature },
  { name: 'a bad signature on a malformed body is a 401, not a parse error', wire: () => github('{not json', { signature: 'sha256=00' }), ...badSignature },
  // Headers and events.
  { name: 'no X-GitHub-Event header', wire: (sha) => github(push(sha), { event: null }), status: 400, error: 'missing header', reason: /^X-GitHub-Event is required$/ },
  { name: 'no X-GitHub-Delivery header', wire: (sha) => github(push(sha), { delivery: null }), status: 400, error: 'missing header', reason: /^X-GitHub-Delivery is required$/ },
  { name: 'an unknown event type', wire: (sha) => github(push(sha), { event: 'made_up_event' }), status: 202, processing: ignored(/^ignored GitHub event "made_up_event"$/) },
  { name: 'a ping event', wire: () => github('{"zen":"Keep it logically awesome.","hook_id":1}', { event: 'ping' }), status: 202, processing: ignored(/^ignored GitHub event "ping"$/) },
  { name: 'a push body sent as pull_request', wire: (sha) => github(push(sha), { event: 'pull_request' }), status: 202, processing: ignored(/^malformed pull_request: /) },
  // Routes.
  { name: 'GET /webhooks/github', wire: () => ({ method: 'GET', path: '/webhooks/github', headers: {} }), status: 405, error: 'method not allowed' },
  { name: 'generic webhook to an unknown source', wire: () => ({ method: 'POST', path: '/webhooks/generic/no-such-source', headers: {}, body: Buffer.from('{}') }), status: 404, error: 'unknown source' },
  { name: 'generic webhook with a wrong HMAC', wire: () => generic('{"a":1}', `sha256=${'0'.repeat(64)}`), status: 401, error: 'invalid signature' },
  { name: 'generic webhook, correctly signed, malformed JSON', wire: () => generic('{"a":'), ...malformed },
  { name: 'a malformed percent-encoding in the source name', wire: () => ({ method: 'POST', path: '/webhooks/generic/%E0%A4%A', headers: {}, body: Buffer.from('{}') }), status: 400, reason: /malformed percent-encoding/ },
  { name: 'a request target that is not a URL (//[)', wire: () => ({ method: 'POST', path: '//[', headers: {}, body: Buffer.from('{}') }), status: 400, reason: /not a valid URL/ },
  { name: 'an absolute-form target with port 99999', wire: () => ({ method: 'POST', path: 'http://x:99999/webhooks/github', headers: {} }), status: 400, reason: /not a valid URL/ },
];

function generic(body: string, signature?: string): Wire {
  const bytes = Buffer.from(body);
  return { method: 'POST', path: `/webhooks/generic/${GENERIC_SOURCE}`, headers: { 'x-signature-256': signature ?? `sha256=${hmac(GENERIC_SECRET, bytes)}` }, body: bytes };
}

/** Group-commit poisoning (no fix yet): these stall every later write, so they run last. */
export const STALLING_CASES: HttpCase[] = [
  {
    name: '100 000 nested arrays inside a field of a good push',
    wire: (sha) => github(pushWithField(sha, 'deep', nested('[', ']'))),
    status: 202,
    processing: { status: 'processed' },
    // The push builds: only the part nested past 128 levels is cut, to a marker that says so.
    run: { status: /^(pending|running)$/, summary: /"deep":\[{127}"\[removed by Switchyard: nested deeper than 128 levels\]"\]{127}/ },
  },
];

const TOKEN_PLACEHOLDER = '<admin>';
/** The 413 goes out before the body is read, and the server closes while the client is still writing. */
const EARLY_413 = 'answered from Content-Length before the body is read; the close may reach the writing client first';

/** An admin API call; the runner puts the real token where `<admin>` stands. */
export function api(method: string, path: string, body?: string, authorization = `Bearer ${TOKEN_PLACEHOLDER}`): Wire {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (authorization !== '') headers['authorization'] = authorization;
  return { method, path, headers, ...(body === undefined ? {} : { body: Buffer.from(body) }) };
}

export function withAdminToken(wire: Wire, token: string): Wire {
  const authorization = wire.headers['authorization'];
  if (authorization === undefined) return wire;
  return { ...wire, headers: { ...wire.headers, authorization: authorization.replace(TOKEN_PLACEHOLDER, token) } };
}

const invalid = (reason: RegExp) => ({ status: 400, error: 'invalid request', reason });
const unauthorized = { status: 401, error: 'unauthorized', reason: /admin bearer token/ };
const staticJob = (name: string, extra: object = {}) => ({ _type: 'static', name, needs: [], steps: [{ name: 's', hasOutputs: false, run: 'true' }], ...extra });
const runBody = (workflow: object) => JSON.stringify({ repository: 'acme/app', workflow });

export const API_CASES: HttpCase[] = [
  { name: 'no bearer token', wire: () => api('GET', '/api/v1/runs', undefined, ''), ...unauthorized },
  { name: 'a wrong bearer token', wire: () => api('GET', '/api/v1/repositories', undefined, 'Bearer sya_wrong'), ...unauthorized },
  { name: 'Basic instead of Bearer', wire: () => api('GET', '/api/v1/agent-tokens', undefined, `Basic ${Buffer.from('admin:admin').toString('base64')}`), ...unauthorized },
  { name: 'a bearer token with a trailing second word', wire: () => api('GET', '/api/v1/runs', undefined, `Bearer ${TOKEN_PLACEHOLDER} extra`), ...unauthorized },
  { name: 'PUT /api/v1/runs', wire: () => api('PUT', '/api/v1/runs', '{}'), status: 405, error: 'method not allowed' },
  { name: 'DELETE /api/v1/repositories', wire: () => api('DELETE', '/api/v1/repositories'), status: 405, error: 'method not allowed' },
  { name: 'PATCH /api/v1/agent-tokens', wire: () => api('PATCH', '/api/v1/agent-tokens', '{}'), status: 405, error: 'method not allowed' },
  { name: 'runs: malformed JSON', wire: () => api('POST', '/api/v1/runs', '{"workflow": {'), ...malformed },
  { name: 'runs: JSON null', wire: () => api('POST', '/api/v1/runs', 'null'), ...invalid(/^body: /) },
  { name: 'runs: workflow.jobs is an object', wire: () => api('POST', '/api/v1/runs', runBody({ name: 'w', jobs: { a: 1 } })), ...invalid(/^workflow\.jobs: /) },
  { name: 'runs: a job _type that does not exist', wire: () => api('POST', '/api/v1/runs', runBody({ name: 'w', jobs: [{ _type: 'bogus' }] })), ...invalid(/^workflow\.jobs\.0\._type: /) },
  { name: 'runs: repository is a number', wire: () => api('POST', '/api/v1/runs', JSON.stringify({ repository: 5, workflow: { name: 'w', jobs: [] } })), ...invalid(/^repository: /) },
  { name: 'runs: a 6 MiB body', wire: () => api('POST', '/api/v1/runs', JSON.stringify({ workflow: { name: 'w', jobs: [], pad: 'x'.repeat(6 * MiB) } })), status: 413, error: 'payload too large', resetAllowed: EARLY_413 },
  {
    name: 'runs: a needs cycle',
    wire: () => api('POST', '/api/v1/runs', runBody({ name: 'cyclic', jobs: [staticJob('a', { needs: ['b'], runsOn: [{ kind: 'exact', value: NOBODY }] }), staticJob('b', { needs: ['a'] })] })),
    status: 400,
    error: 'invalid workflow',
    reason: /^workflow\.jobs\.\d\.needs\.0: needs cycle: /,
  },
  { name: 'repositories: name is not owner/name', wire: () => api('POST', '/api/v1/repositories', '{"name":"no-slash","provider":"local","path":"/tmp"}'), ...invalid(/^name: must be owner\/name$/) },
  { name: 'repositories: an unknown provider', wire: () => api('POST', '/api/v1/repositories', '{"name":"a/b","provider":"svn","path":"/tmp"}'), ...invalid(/^provider: /) },
  { name: 'repositories: local without a path', wire: () => api('POST', '/api/v1/repositories', '{"name":"a/b","provider":"local"}'), ...invalid(/^path: a local repository needs path$/) },
  { name: 'repositories: name is a number', wire: () => api('POST', '/api/v1/repositories', '{"name":7,"provider":"local","path":"/tmp"}'), ...invalid(/^name: /) },
  { name: 'repositories: trailing garbage', wire: () => api('POST', '/api/v1/repositories', '{"name":"a/b"}}'), ...malformed },
  { name: 'agent-tokens: labels is a string', wire: () => api('POST', '/api/v1/agent-tokens', '{"labels":"linux"}'), ...invalid(/^labels: /) },
  { name: 'agent-tokens: an unknown field', wire: () => api('POST', '/api/v1/agent-tokens', '{"admin":true}'), ...invalid(/admin/) },
  { name: 'agent-tokens: a negative expiry', wire: () => api('POST', '/api/v1/agent-tokens', '{"expiresInSeconds":-1}'), ...invalid(/^expiresInSeconds: /) },
  { name: 'agent-tokens: a label with whitespace', wire: () => api('POST', '/api/v1/agent-tokens', '{"labels":["a b"]}'), ...invalid(/^labels\.0: a label has no whitespace$/) },
  { name: 'agent-tokens: kind ephemeral', wire: () => api('POST', '/api/v1/agent-tokens', '{"kind":"ephemeral"}'), ...invalid(/^kind: /) },
  { name: 'agent-tokens: revoke an unknown id', wire: () => api('DELETE', '/api/v1/agent-tokens/no-such-token'), status: 404, error: 'not found' },
  { name: 'runs: get an unknown run', wire: () => api('GET', '/api/v1/runs/no-such-run'), status: 404, error: 'not found' },
  { name: 'runs: cancel with force a string', wire: () => api('POST', '/api/v1/runs/no-such-run/cancel', '{"force":"yes"}'), ...invalid(/^force: /) },
  { name: 'runs: a malformed percent-encoding in the run id', wire: () => api('GET', '/api/v1/runs/%E0%A4%A'), status: 400, reason: /malformed percent-encoding/ },
];

/** A good lock file: one push workflow whose job waits for an agent nobody has. */
export function goodLock(workflow = 'ci', jobExtra: object = {}): string {
  return lockFileWith([pushWorkflow(workflow, [runJob('build', ['true'], { runsOn: [{ kind: 'exact', value: NOBODY }], ...jobExtra })])]);
}

export interface LockCase {
  name: string;
  lock: string;
  /** corrupt: a failed `(unresolved workflow)` run with a `lock_resolution` init failure; job: the job fails `dynamic_eval`. */
  expect: 'corrupt' | 'job';
  message: RegExp;
}

const inline = (expression: string) => ({ _type: 'inline', expression });
const withJobs = (jobs: object[]) => lockFileWith([pushWorkflow('corrupt', jobs)]);
const job = (name: string, extra: object = {}) => runJob(name, ['true'], { runsOn: [{ kind: 'exact', value: NOBODY }], ...extra });
const corrupt = (name: string, lock: string, message: RegExp): LockCase => ({ name, lock, expect: 'corrupt', message });
const hostile = (name: string, field: 'concurrencyGroup' | 'env', expression: string, message: RegExp): LockCase => ({
  name,
  lock: lockFileWith([pushWorkflow('hostile', [job('build', { [field]: inline(expression) })])]),
  expect: 'job',
  message: new RegExp(`^inline ${field} of job build: ${message.source}`),
});
const good = JSON.parse(goodLock()) as Record<string, unknown>;

export const LOCK_CASES: LockCase[] = [
  corrupt('not JSON (cut off)', goodLock().slice(0, 40), /lock file is not valid JSON/),
  corrupt('whitespace only', '  \n\t\n', /lock file is empty/),
  corrupt('a JSON array', '[]', /a lock file must be a JSON object/),
  corrupt('schemaVersion 28', JSON.stringify({ ...good, schemaVersion: 28 }), /schemaVersion 28 is not supported/),
  corrupt('schemaVersion the string "29"', JSON.stringify({ ...good, schemaVersion: '29' }), /schemaVersion must be a number/),
  corrupt('a job without steps', withJobs([{ _type: 'static', name: 'build', needs: [] }]), /missing required field `steps`/),
  corrupt('a job without needs', withJobs([{ _type: 'static', name: 'build', steps: [] }]), /missing required field `needs`/),
  corrupt('a workflow without jobs', lockFileWith([{ ...pushWorkflow('w', []), jobs: undefined }]), /missing required field `jobs`/),
  corrupt('runsOn as legacy plain strings', withJobs([job('build', { runsOn: ['linux'] })]), /runsOn\[0\]/),
  corrupt('needs an unknown job', withJobs([job('build', { needs: ['ghost'] })]), /unknown needs target "ghost"/),
  corrupt('a needs cycle', withJobs([job('a', { needs: ['c'] }), job('b', { needs: ['a'] }), job('c', { needs: ['b'] })]), /needs cycle: /),
  corrupt('duplicate job names', withJobs([job('build'), job('build')]), /duplicate job name "build"/),
  corrupt('a ReDoS-prone branch regex', lockFileWith([pushWorkflow('redos', [job('build')], { triggers: [{ _type: 'push', branches: [{ type: 'regex', pattern: '^(a+)+$' }], paths: [] }] })]), /is ReDoS-prone/),
  corrupt('a branch regex that does not compile', lockFileWith([pushWorkflow('bad-re', [job('build')], { triggers: [{ _type: 'push', branches: [{ type: 'regex', pattern: '([' }], paths: [] }] })]), /does not compile/),
  corrupt('an inline expression that is a call, not an arrow', withJobs([job('build', { concurrencyGroup: inline('process.exit()') })]), /must be a single arrow function, found CallExpression/),
  corrupt('code after the arrow function', withJobs([job('build', { env: inline('(e) => ({}); process.exit()') })]), /code after the arrow function/),
  corrupt('an inline expression that does not parse', withJobs([job('build', { env: inline('(e) => {') })]), /inline expression does not parse/),
  corrupt('a run step with workingDirectory ../..', withJobs([job('build', { steps: [{ name: 's', hasOutputs: false, run: 'true', workingDirectory: '../..' }] })]), /workingDirectory/),
  corrupt('100 000 nested arrays as workflows', `{"schemaVersion":29,"source":{"file":"a","export":"#default"},"contentHash":"","workflows":[${nested('[', ']')}]}`, /\$\.workflows\[0\]/),
  corrupt('over the 5 MiB cap', JSON.stringify({ ...good, pad: 'x'.repeat(5 * MiB + 1) }), /over the 5242880-byte \(5 MiB\) limit/),
  hostile('concurrencyGroup: while (true) {}', 'concurrencyGroup', '(event) => { while (true) {} }', /timed out after 100 ms$/),
  hostile('env: process.exit()', 'env', '(event) => process.exit(1)', /ReferenceError: process is not defined$/),
  hostile('concurrencyGroup: the Function constructor', 'concurrencyGroup', '(event) => this.constructor.constructor("return process")().exit()', /ReferenceError: process is not defined$/),
  hostile('env: a memory bomb', 'env', '(event) => { const a = []; while (true) a.push(new Array(1e6).fill(1)); }', /(timed out after 100 ms|exceeded the 32 MB memory limit)$/),
  hostile('concurrencyGroup: a 64 MiB string', 'concurrencyGroup', '(event) => "x".repeat(2 ** 26)', /(timed out after 100 ms|exceeded the 32 MB memory limit)$/),
  // On a loaded machine the 100 ms budget can run out before the stack does: either is the clear error.
  hostile('env: unbounded recursion', 'env', '(event) => { const f = () => f(); return f(); }', /(RangeError: Maximum call stack size exceeded|timed out after 100 ms)$/),
  hostile('env: the event itself (not a string map)', 'env', '(event) => event', /value of "\w+" is (an object|a boolean|undefined|null)/),
];
