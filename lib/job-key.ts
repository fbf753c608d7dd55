/** One key for a job of a run, for maps of jobs across runs (a NUL cannot appear in a run id or a job key). */
export function jobKeyOf(runId: string, jobKey: string): string {
  return `${runId}\u0000${jobKey}`;
}
