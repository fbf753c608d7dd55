/**
 * Delay before reconnect attempt `attempt` (0-based): base × 1.5^attempt × (1 + random·0.5),
 * capped (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with). The attempt counter is reset on `register.ack`.
 */
export function reconnectDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number): number {
  const delay = baseMs * 1.5 ** attempt * (1 + random() * 0.5);
  return Math.min(capMs, Math.round(delay));
}
