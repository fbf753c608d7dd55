/**
 * Where a run came from, as a person reads it in a list: the commit's first message line and its
 * author, from the event's payload when it carries them (a GitHub push's `head_commit` or last
 * `commits` entry, a pull request's title and author), and for a run started by hand, who started it.
 * Nothing is invented: a field the payload does not carry is null.
 */
export interface RunOrigin {
  commit: { message: string | null; author: string | null } | null;
  startedBy: string | null;
}

const MESSAGE_CHARS = 200;

export function runOriginOf(inputSummary: unknown): RunOrigin {
  const summary = record(inputSummary);
  const startedBy = text(summary?.['startedBy']);
  const event = record(summary?.['event']);
  const payload = record(event?.['payload']);
  const sender = text(record(payload?.['sender'])?.['login']) ?? text(event?.['senderUsername']);
  const commit = commitOf(payload, sender);
  return { commit, startedBy: startedBy ?? (summary?.['provider'] === 'api' ? 'an administrator (API)' : null) };
}

function commitOf(payload: Record<string, unknown> | null, sender: string | null): RunOrigin['commit'] {
  if (!payload) return null;
  const commits = Array.isArray(payload['commits']) ? payload['commits'] : [];
  const head = record(payload['head_commit']) ?? record(commits.at(-1));
  if (head) return { message: firstLine(text(head['message'])), author: authorOf(record(head['author'])) ?? sender };
  const pull = record(payload['pull_request']);
  if (pull) return { message: firstLine(text(pull['title'])), author: text(record(pull['user'])?.['login']) ?? sender };
  return sender ? { message: null, author: sender } : null;
}

function authorOf(author: Record<string, unknown> | null): string | null {
  return text(author?.['username']) ?? text(author?.['name']) ?? null;
}

function firstLine(message: string | null): string | null {
  if (message === null) return null;
  const line = message.split('\n', 1)[0]?.trim() ?? '';
  return line === '' ? null : line.length > MESSAGE_CHARS ? `${line.slice(0, MESSAGE_CHARS - 1)}…` : line;
}

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}
