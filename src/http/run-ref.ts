import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { HttpError } from './respond.ts';

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ID_PREFIX = /^[0-9a-f][0-9a-f-]{3,35}$/i;
const NUMBERED = /^(?:(.+))?#(\d{1,15})$/;
const BARE_NUMBER = /^\d{1,15}$/;
/** More candidates than this are not listed in the refusal. */
const LISTED = 5;

/**
 * The run a reference names, as the API and the CLI take it: the full id; a unique prefix of it (at
 * least 4 characters, as the runs page shows 8); `owner/repo#12`, the run's number in its repository;
 * `#12` or `12` when one repository alone has a run numbered so (a bare number is also tried as an id
 * prefix, and must name one run either way). An unknown reference is a 404, an ambiguous one a 409
 * that names the candidates; anything else is passed through, for the route's own 404.
 */
export async function resolveRunRef(db: Kysely<Schema>, ref: string): Promise<string> {
  if (FULL_ID.test(ref)) return ref.toLowerCase();
  const numbered = NUMBERED.exec(ref);
  if (numbered) return only(ref, await byNumber(db, Number(numbered[2]), numbered[1]));
  const candidates = [
    ...(BARE_NUMBER.test(ref) ? await byNumber(db, Number(ref)) : []),
    ...(ID_PREFIX.test(ref) ? await byPrefix(db, ref.toLowerCase()) : []),
  ];
  if (candidates.length === 0 && !BARE_NUMBER.test(ref) && !ID_PREFIX.test(ref)) return ref;
  return only(ref, candidates);
}

interface Candidate {
  run_id: string;
  repository: string | null;
  number: number | null;
}

function only(ref: string, candidates: readonly Candidate[]): string {
  const unique = [...new Map(candidates.map((c) => [c.run_id, c])).values()];
  const [first] = unique;
  if (unique.length === 1 && first) return first.run_id;
  if (!first) throw new HttpError(404, 'not found', `no run ${ref}`);
  const listed = unique.slice(0, LISTED).map((c) => `${c.repository ?? '(none)'}#${c.number ?? '?'} (${c.run_id})`);
  throw new HttpError(409, 'ambiguous run', `${ref} names ${unique.length > LISTED ? 'more than ' + LISTED : unique.length} runs: ${listed.join(', ')}; give the full id or repository#number`);
}

function byNumber(db: Kysely<Schema>, number: number, repository?: string): Promise<Candidate[]> {
  let query = db.selectFrom('runs').select(['run_id', 'repository', 'number']).where('number', '=', number).limit(LISTED + 1);
  if (repository !== undefined) query = query.where('repository', '=', repository);
  return query.execute();
}

/** A prefix scan on the `text_pattern_ops` index (migration 019). */
function byPrefix(db: Kysely<Schema>, prefix: string): Promise<Candidate[]> {
  return db
    .selectFrom('runs')
    .select(['run_id', 'repository', 'number'])
    .where('run_id', 'like', `${prefix.replace(/[%_\\]/g, '\\$&')}%`)
    .orderBy('run_id')
    .limit(LISTED + 1)
    .execute();
}
