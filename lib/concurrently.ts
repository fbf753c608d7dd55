/**
 * Runs `work` on every item with at most `limit` at once, in the items' order of starting; resolves
 * when all have settled. `work` handles its own failures (a rejection here is a bug and is thrown).
 */
export async function forEachConcurrently<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/** Throws the reason of the first rejected outcome, if any: for work that lets every promise settle before it reports a failure. */
export function throwFirstRejection(outcomes: readonly PromiseSettledResult<unknown>[]): void {
  const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  if (failed) throw failed.reason;
}
