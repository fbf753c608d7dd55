/** A master key is AES-256: 32 bytes (docs/http-api.md#secrets). */
const KEY_BYTES = 32;

/** 32 bytes as 64 hex digits or as base64; anything else is an error naming what was wrong (never the value). */
export function parseMasterKey(text: string): Buffer {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) {
    const decoded = Buffer.from(trimmed, 'base64');
    if (decoded.length === KEY_BYTES) return decoded;
    throw new Error(`must be 32 bytes (64 hex digits or base64 of 32 bytes); the base64 value decodes to ${decoded.length} bytes`);
  }
  throw new Error(`must be 32 bytes (64 hex digits or base64 of 32 bytes); got ${trimmed.length} characters that are neither`);
}
