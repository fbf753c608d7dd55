import { createHash } from 'node:crypto';

/** RFC 4122 URL namespace; any fixed namespace works, this one is well known. */
const NAMESPACE = Buffer.from('6ba7b8119dad11d180b400c04fd430c8', 'hex');

/** UUIDv5 of a name: the same delivery and workflow always give the same run id (INT-5). */
export function uuidV5(name: string): string {
  const hash = createHash('sha1').update(NAMESPACE).update(name, 'utf8').digest();
  const bytes = Buffer.from(hash.subarray(0, 16));
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x50;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function runIdFor(source: string, deliveryId: string, workflowName: string): string {
  return uuidV5(`${source}:${deliveryId}:${workflowName}`);
}
