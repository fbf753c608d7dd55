export { replayRecordedRun, type ReplayOptions } from './engine.ts';
export { loadRecordedRun, type RecordedRun, type StoredSnapshot } from './load.ts';
export { formatReport, formatStep, formatSummary } from './format.ts';
export { diffJson, type JsonDifference } from './compare.ts';
export { ReplayJournalError, ReplayRangeError, ReplayRunNotFoundError, ReplayVersionError } from './errors.ts';
export type { ReplayReport, ReplayStep, StateSummary } from './types.ts';
