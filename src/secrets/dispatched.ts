import { compileRedactor } from '../security/redact.ts';

/** Attempts whose values are kept at most; the oldest is dropped first (a job that never ended). */
const MAX_ATTEMPTS = 10_000;

interface Entry {
  values: readonly string[];
  redact: (text: string) => string;
  timer?: NodeJS.Timeout;
}

/**
 * SEC-4: the secret values this coordinator sent to each attempt (by dispatch id, the wire's `jobId`),
 * kept in memory only, so the job's log chunks, `job.context` and error texts can be masked. An entry
 * is dropped a grace period after the attempt ends (late frames of the attempt are still masked).
 */
export class DispatchedSecrets {
  private readonly entries = new Map<string, Entry>();
  private static readonly plain = compileRedactor([]);

  constructor(private readonly graceMs: number) {}

  remember(dispatchId: string, values: readonly string[]): void {
    this.forget(dispatchId);
    if (this.entries.size >= MAX_ATTEMPTS) this.forget(this.entries.keys().next().value as string);
    this.entries.set(dispatchId, { values, redact: compileRedactor(values) });
  }

  /** Masks `text` against the attempt's values, `kat_` tokens included (known or not). */
  redactorOf(dispatchId: string): (text: string) => string {
    return this.entries.get(dispatchId)?.redact ?? DispatchedSecrets.plain;
  }

  valuesOf(dispatchId: string): readonly string[] {
    return this.entries.get(dispatchId)?.values ?? [];
  }

  /** The attempt ended: its values go after the grace period for late frames. */
  ended(dispatchId: string): void {
    const entry = this.entries.get(dispatchId);
    if (!entry || entry.timer) return;
    entry.timer = setTimeout(() => this.forget(dispatchId), this.graceMs);
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
