/** What a batch call gives each item, in the items' order: its result, or an Error that fails that item alone. */
export type BatchResults<R> = readonly (R | Error)[];

interface Waiting<T, R> {
  item: T;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/**
 * Runs one call (a write, or a read) for many items: one call is in flight, and the items added
 * meanwhile go in the next one (at most `maxBatch` a call). A burst of N items costs a few
 * statements, not N, and a lone item goes at once. Each `add` settles with its own item's result;
 * a call that throws rejects every item of its batch, and the next batch goes as usual.
 */
export class Batcher<T, R = void> {
  private waiting: Waiting<T, R>[] = [];
  private running = false;

  constructor(
    private readonly call: (items: T[]) => Promise<BatchResults<R>>,
    private readonly maxBatch: number,
  ) {}

  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      try {
        const results = await this.call(batch.map((waiting) => waiting.item));
        batch.forEach(({ resolve, reject }, i) => {
          const result = results[i];
          if (i >= results.length) reject(new Error(`a batch call gave ${results.length} results for ${batch.length} items`));
          else if (result instanceof Error) reject(result);
          else resolve(result as R);
        });
      } catch (error) {
        for (const { reject } of batch) reject(error);
      }
    }
    this.running = false;
  }
}
