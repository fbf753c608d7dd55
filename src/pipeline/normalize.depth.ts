/**
 * Deepest nesting of a provider payload kept in an envelope. Real payloads are a few levels deep;
 * deeper parts would overflow serializers down the line (storage, sandbox, dispatch messages).
 */
export const MAX_PAYLOAD_DEPTH = 128;

export const TOO_DEEP_MARKER = `[removed by Switchyard: nested deeper than ${MAX_PAYLOAD_DEPTH} levels]`;

/**
 * The payload with every object or array below MAX_PAYLOAD_DEPTH replaced by TOO_DEEP_MARKER, so
 * the event still builds and the cut is visible where it happened. Recursion stops at the cap, so
 * any depth is safe; an unchanged part is returned as is (no copy).
 */
export function capPayloadDepth(payload: unknown): unknown {
  return cap(payload, 1);
}

function cap(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (depth > MAX_PAYLOAD_DEPTH) return TOO_DEEP_MARKER;
  if (Array.isArray(value)) {
    const items: unknown[] = value;
    let copy: unknown[] | null = null;
    items.forEach((item, index) => {
      const capped = cap(item, depth + 1);
      if (capped === item) return;
      copy ??= [...items];
      copy[index] = capped;
    });
    return copy ?? items;
  }
  let copy: Record<string, unknown> | null = null;
  for (const [key, item] of Object.entries(value)) {
    const capped = cap(item, depth + 1);
    if (capped === item) continue;
    copy ??= { ...value };
    copy[key] = capped;
  }
  return copy ?? value;
}
