import { githubHeaders, pushPayload } from '../support/webhooks.ts';
import type { ChaosCoordinator } from './cluster.ts';
import type { Rng } from './rng.ts';

export interface DeliveryRecord {
  deliveryId: string;
  /** Requests sent for it: duplicates included, retries after a refused or hung request included. */
  sends: number;
  /** The first 2xx (202 accepted, or 200 duplicate) answered it; null while nobody accepted it. */
  acceptedBy: string | null;
  answers: Record<string, number>;
}

const REQUEST_TIMEOUT_MS = 3000;
const GIVE_UP_AFTER_MS = 90_000;

/**
 * Webhook deliveries as GitHub sends them under trouble: each delivery goes out one to three times
 * (duplicates), the copies to any coordinator that is up and after random delays (so deliveries
 * arrive reordered), and a delivery nobody accepted (refused, hung, 5xx) is sent again, as GitHub's
 * redelivery would.
 */
export class WebhookLoad {
  readonly deliveries = new Map<string, DeliveryRecord>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly coordinators: readonly ChaosCoordinator[],
    private readonly secret: string,
    private readonly sha: string,
    private readonly rng: Rng,
  ) {}

  /** Sends `count` new deliveries, each with its copies, without waiting for the answers. */
  burst(count: number): void {
    for (let i = 0; i < count; i++) {
      const deliveryId = `chaos-${this.deliveries.size}`;
      const record: DeliveryRecord = { deliveryId, sends: 0, acceptedBy: null, answers: {} };
      this.deliveries.set(deliveryId, record);
      const copies = this.rng.weighted([[6, 1], [3, 2], [1, 3]] as const);
      for (let copy = 0; copy < copies; copy++) this.track(this.deliver(record, this.rng.int(0, copy === 0 ? 50 : 1500)));
    }
  }

  /** Waits for every send (and its retries) to settle. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  unaccepted(): DeliveryRecord[] {
    return [...this.deliveries.values()].filter((d) => d.acceptedBy === null);
  }

  private track(promise: Promise<void>): void {
    this.inFlight.add(promise);
    void promise.finally(() => this.inFlight.delete(promise));
  }

  private async deliver(record: DeliveryRecord, delayMs: number): Promise<void> {
    await sleep(delayMs);
    const body = JSON.stringify(pushPayload(this.sha));
    const giveUpAt = Date.now() + GIVE_UP_AFTER_MS;
    while (Date.now() < giveUpAt) {
      const target = this.pickTarget();
      if (target) {
        const status = await this.send(target, body, record.deliveryId);
        record.sends++;
        record.answers[status] = (record.answers[status] ?? 0) + 1;
        if (status === '202' || status === '200') {
          record.acceptedBy ??= target.id;
          return;
        }
      }
      await sleep(this.rng.int(100, 400));
    }
  }

  private pickTarget(): ChaosCoordinator | undefined {
    const candidates = this.coordinators.filter((c) => c.state === 'up' || c.state === 'stopped');
    return candidates.length > 0 ? this.rng.pick(candidates) : undefined;
  }

  private async send(target: ChaosCoordinator, body: string, deliveryId: string): Promise<string> {
    try {
      const res = await fetch(`${target.url}/webhooks/github`, {
        method: 'POST',
        body,
        headers: await githubHeaders(this.secret, body, deliveryId),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      await res.arrayBuffer();
      return String(res.status);
    } catch (error) {
      return error instanceof Error && error.name === 'TimeoutError' ? 'timeout' : 'refused';
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
