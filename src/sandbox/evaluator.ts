import ivm from 'isolated-vm';
import { NodeSnapshotEnabledError, SandboxDisposedError } from './errors.ts';
import { HARNESS_SOURCE, decodeHarnessOutcome } from './harness.ts';

/** `string` for `environments[].value` and `concurrencyGroup`; `stringMap` for `env` (EVAL-4). */
export type SandboxExpectation = 'string' | 'stringMap';

export interface SandboxRequest {
  /** Verbatim source of the inline arrow function, e.g. `(event) => event.targetBranch`. */
  expression: string;
  /** The normalized event envelope; the sandbox sees a deep JSON copy of it. */
  event: unknown;
  expect: SandboxExpectation;
  /** Lock-file field being evaluated, as it should appear in the error message (`env`, ...). */
  field: string;
  jobName: string;
}

/** On failure, `message` is `inline <field> of job <job>: <error>` (EVAL-5). */
export type SandboxResult =
  | { ok: true; value: string | Record<string, string> }
  | { ok: false; message: string };

/**
 * Evaluates inline lock-file expressions against an event (EVAL-2..5). Every failure of the
 * expression resolves to `{ ok: false }`; `evaluate` rejects only with `SandboxDisposedError`.
 */
export interface Sandbox {
  evaluate(request: SandboxRequest): Promise<SandboxResult>;
  /** Frees the isolate. Later and still-running evaluations reject with `SandboxDisposedError`. */
  dispose(): void;
}

export interface IsolatedVmSandboxOptions {
  /**
   * Budget for one evaluation (parsing the event, compiling and running the expression, checking
   * the result), in milliseconds.
   * @default 100
   */
  timeoutMs?: number;
  /**
   * Heap limit of the pooled isolate, in MB; isolated-vm's minimum is 8. Hostile code may overshoot
   * it by 2-3x before it is stopped, and the event copy counts against it.
   * @default 32
   */
  memoryLimitMb?: number;
}

interface CompiledSandboxOptions {
  readonly timeoutMs: number;
  readonly memoryLimitMb: number;
}

const TIMED_OUT = 'Script execution timed out.';

/**
 * One pooled isolate, a fresh context per evaluation. Evaluations run one at a time, in call
 * order: were they interleaved, an expression that hits the memory limit would take the shared
 * isolate, and with it the innocent evaluations running beside it, down.
 */
export class IsolatedVmSandbox implements Sandbox {
  readonly #options: CompiledSandboxOptions;
  #isolate: ivm.Isolate | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #disposed = false;

  constructor(options: IsolatedVmSandboxOptions = {}) {
    if (!process.execArgv.includes('--no-node-snapshot')) {
      throw new NodeSnapshotEnabledError(process.execArgv);
    }
    this.#options = compileOptions(options);
  }

  evaluate(request: SandboxRequest): Promise<SandboxResult> {
    const turn = this.#queue.then(() => this.#evaluateNow(request));
    // The queue only orders turns; each caller receives its own turn's outcome.
    this.#queue = turn.catch(() => undefined);
    return turn;
  }

  dispose(): void {
    this.#disposed = true;
    if (this.#isolate !== undefined && !this.#isolate.isDisposed) this.#isolate.dispose();
    this.#isolate = undefined;
  }

  async #evaluateNow(request: SandboxRequest): Promise<SandboxResult> {
    if (this.#disposed) throw new SandboxDisposedError(request.jobName);
    const eventJson = toJson(request.event);
    if (typeof eventJson !== 'string' && eventJson !== undefined) {
      return failure(request, `the event is not JSON-serializable: ${eventJson.message}`);
    }
    const isolate = this.#pooledIsolate();
    let context: ivm.Context | undefined;
    try {
      context = await isolate.createContext();
      const raw: unknown = await context.evalClosure(
        HARNESS_SOURCE,
        [eventJson, request.expression, request.expect],
        { timeout: this.#options.timeoutMs, result: { copy: true } },
      );
      const outcome = decodeHarnessOutcome(raw, request.expect);
      return outcome.ok ? outcome : failure(request, outcome.message);
    } catch (thrown) {
      if (this.#disposed) throw new SandboxDisposedError(request.jobName);
      return failure(request, this.#describeAbort(isolate, thrown));
    } finally {
      if (context !== undefined && !isolate.isDisposed) context.release();
    }
  }

  /** The isolate for this turn; one that hit its memory limit was disposed and is replaced. */
  #pooledIsolate(): ivm.Isolate {
    if (this.#isolate === undefined || this.#isolate.isDisposed) {
      this.#isolate = new ivm.Isolate({ memoryLimit: this.#options.memoryLimitMb });
    }
    return this.#isolate;
  }

  /** The harness catches every JS error, so what reaches here stopped the isolate itself. */
  #describeAbort(isolate: ivm.Isolate, thrown: unknown): string {
    if (isolate.isDisposed) return `exceeded the ${this.#options.memoryLimitMb} MB memory limit`;
    const message = thrown instanceof Error ? thrown.message : String(thrown);
    if (message === TIMED_OUT) return `timed out after ${this.#options.timeoutMs} ms`;
    return `sandbox error: ${message}`;
  }
}

function compileOptions(options: IsolatedVmSandboxOptions): CompiledSandboxOptions {
  const timeoutMs = options.timeoutMs ?? 100;
  const memoryLimitMb = options.memoryLimitMb ?? 32;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive integer, got ${timeoutMs}`);
  }
  if (!Number.isInteger(memoryLimitMb) || memoryLimitMb < 8) {
    throw new RangeError(`memoryLimitMb must be an integer of at least 8, got ${memoryLimitMb}`);
  }
  return { timeoutMs, memoryLimitMb };
}

function failure(request: SandboxRequest, error: string): SandboxResult {
  return { ok: false, message: `inline ${request.field} of job ${request.jobName}: ${error}` };
}

/** JSON text of the event, `undefined` when JSON has no text for it, or why it cannot be copied. */
function toJson(event: unknown): string | undefined | Error {
  try {
    const text: string | undefined = JSON.stringify(event);
    return text;
  } catch (thrown) {
    return thrown instanceof Error ? thrown : new Error(String(thrown));
  }
}
