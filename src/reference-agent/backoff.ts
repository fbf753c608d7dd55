import { backoffMs } from '../../lib/backoff.ts';

/**
 * Delay before reconnect attempt `attempt` (0-based): base × 1.5^attempt × (1 + random·0.5),
 * capped (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with). The attempt counter is reset on `register.ack`.
 */
export function reconnectDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number): number {
  return backoffMs(attempt + 1, { baseMs, maxMs: capMs, factor: 1.5, jitter: 0.5 }, random);
}
