import type { Migration } from 'kysely';
import * as core001 from './001_core.ts';
import * as jsonJournal002 from './002_json_journal.ts';
import * as inboxAndGroups003 from './003_inbox_and_groups.ts';
import * as agents004 from './004_agents.ts';
import * as intake005 from './005_intake.ts';
import * as scalers006 from './006_scalers.ts';
import * as journalWriter007 from './007_journal_writer.ts';
import * as jobResults008 from './008_job_results.ts';
import * as sharedAgents009 from './009_shared_agents.ts';
import * as logChunkTime010 from './010_log_chunk_time.ts';
import * as secrets011 from './011_secrets.ts';
import * as environments012 from './012_environments.ts';
import * as liveOwners013 from './013_live_owners.ts';
import * as livenessLock014 from './014_liveness_lock.ts';
import * as blobs015 from './015_blobs.ts';
import * as emittedEvents016 from './016_emitted_events.ts';
import * as buildCaches017 from './017_build_caches.ts';
import * as jobTimes018 from './018_job_times.ts';
import * as runNumbers019 from './019_run_numbers.ts';
import * as retention020 from './020_retention.ts';

/**
 * Every migration, by name, in the order they apply. A static import map works under tsx, node
 * and any bundler alike; a test checks that each numbered file in this folder is listed.
 */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '001_core': core001,
  '002_json_journal': jsonJournal002,
  '003_inbox_and_groups': inboxAndGroups003,
  '004_agents': agents004,
  '005_intake': intake005,
  '006_scalers': scalers006,
  '007_journal_writer': journalWriter007,
  '008_job_results': jobResults008,
  '009_shared_agents': sharedAgents009,
  '010_log_chunk_time': logChunkTime010,
  '011_secrets': secrets011,
  '012_environments': environments012,
  '013_live_owners': liveOwners013,
  '014_liveness_lock': livenessLock014,
  '015_blobs': blobs015,
  '016_emitted_events': emittedEvents016,
  '017_build_caches': buildCaches017,
  '018_job_times': jobTimes018,
  '019_run_numbers': runNumbers019,
  '020_retention': retention020,
};
