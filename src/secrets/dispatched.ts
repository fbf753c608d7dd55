import { compileRedactor } from '../security/redact.ts';

/** Attempts whose values are kept in memory at most; the oldest is dropped first (a job that never ended). */
const MAX_ATTEMPTS = 10_000;

type Redact = (text: string) => string;

interface Entry {
  redact: Redact;
  timer?: NodeJS.Timeout;
}

/** Where the values of an attempt are kept sealed, for a coordinator that did not send them (after a restart). */
export interface AttemptValueStore {
  load(dispatchId: string): Promise<string[] | null>;
  drop(dispatchId: string): Promise<void>;
}

/**
 * SEC-4: the secret values sent to each attempt (by dispatch id, the wire's `jobId`), in memory, so
 * the attempt's log chunks, `job.context` and error texts can be masked. A coordinator that did not
 * send them (it restarted, or a peer sent them) loads them once from the sealed store. An entry is
 * dropped a grace period after the attempt ends, so late frames of the attempt are still masked.
 */
export class DispatchedSecrets {
  private readonly entries = new Map<string, Entry>();
  private static readonly plain: Redact = compileRedactor([]);

  constructor(
    private readonly graceMs: number,
    private readonly store: AttemptValueStore | null = null,
    private readonly onStoreError: (error: unknown) => void = () => undefined,
  ) {}

  remember(dispatchId: string, values: readonly string[]): void {
    this.forget(dispatchId);
    if (this.entries.size >= MAX_ATTEMPTS) this.forget(this.entries.keys().next().value as string);
    this.entries.set(dispatchId, { redact: compileRedactor(values) });
  }

  /** Masks a text against the attempt's values, `kat_` tokens included (known or not); sync, from memory. */
  redactorOf(dispatchId: string): Redact {
    return this.entries.get(dispatchId)?.redact ?? DispatchedSecrets.plain;
  }

  /** As `redactorOf`, loading the attempt's values from the store when they are not in memory. */
  async redactorFor(dispatchId: string): Promise<Redact> {
    const known = this.entries.get(dispatchId);
    if (known || !this.store) return known?.redact ?? DispatchedSecrets.plain;
    let values: string[] | null = null;
    try {
      values = await this.store.load(dispatchId);
    } catch (thrown) {
      this.onStoreError(thrown);
    }
    if (!this.entries.has(dispatchId)) this.remember(dispatchId, values ?? []);
    return this.redactorOf(dispatchId);
  }

  /** The attempt ended: its values go after the grace period for late frames. */
  ended(dispatchId: string): void {
    const entry = this.entries.get(dispatchId);
    if (!entry || entry.timer) return;
    entry.timer = setTimeout(() => {
      this.forget(dispatchId);
      this.store?.drop(dispatchId).catch((thrown: unknown) => this.onStoreError(thrown));
    }, this.graceMs);
    entry.timer.unref();
  }

  forget(dispatchId: string): void {
    const entry = this.entries.get(dispatchId);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.entries.delete(dispatchId);
  }

  get size(): number {
    return this.entries.size;
  }
}
