import { z } from 'zod';
import { id } from './common.ts';

/** Agent → orchestrator requests about storage and events (docs/protocol.md#requests-storage-and-events). */

const sha256Hex = z.string().regex(/^[0-9a-fA-F]{64}$/, 'a SHA-256 in hex');
/** A cache key as the agent builds it: printable, one line, at most 512 characters. */
const cacheKey = z
  .string()
  .min(1)
  .max(512)
  .refine((key) => [...key].every((char) => char.charCodeAt(0) >= 0x20), 'printable, on one line');

export const cacheUploadRequestSchema = z.object({
  type: z.literal('cache.upload.request'),
  messageId: id,
  jobId: id,
  cacheType: z.enum(['source', 'deps']),
  contentHash: z.string().max(256).optional(),
  lockfileHash: z.string().max(256).optional(),
  platform: z.string().max(64),
  arch: z.string().max(64),
});

export const cacheUploadCompleteSchema = cacheUploadRequestSchema.extend({
  type: z.literal('cache.upload.complete'),
  depsHash: z.string().max(256).optional(),
});

export const cacheUserRestoreRequestSchema = z.object({
  type: z.literal('cache.user.restore.request'),
  messageId: id,
  jobId: id,
  key: cacheKey,
  restoreKeys: z.array(cacheKey).max(32).optional(),
});

export const cacheUserSaveRequestSchema = z.object({
  type: z.literal('cache.user.save.request'),
  messageId: id,
  jobId: id,
  key: cacheKey,
});

export const cacheUserSaveCompleteSchema = z.object({
  type: z.literal('cache.user.save.complete'),
  messageId: id,
  jobId: id,
  key: cacheKey,
  tarHash: sha256Hex,
  sizeBytes: z.number().int().nonnegative(),
});

export const provenanceUploadRequestSchema = z.object({
  type: z.literal('provenance.upload.request'),
  messageId: id,
  jobId: id,
  subjectDigest: sha256Hex,
});

export const provenanceUploadCompleteSchema = z.object({
  type: z.literal('provenance.upload.complete'),
  messageId: id,
  jobId: id,
  subjectName: z.string().min(1).max(1024),
  subjectDigest: sha256Hex,
  mediaType: z.string().min(1).max(256),
});

export const eventEmitSchema = z.object({
  type: z.literal('event.emit'),
  jobId: id,
  requestId: id,
  eventName: z.string().min(1).max(256),
  payload: z.record(z.string(), z.unknown()),
  target: z.object({ repos: z.array(z.string().min(1).max(256)).max(100).optional() }).optional(),
});

export const agentApiRequestSchema = z.object({
  type: z.literal('agent.api.request'),
  requestId: id,
  method: z.string().min(1).max(256),
  params: z.record(z.string(), z.unknown()).default({}),
});

/** Requests answered with one response each; the `*.complete` messages are answered by nothing. */
export const STORAGE_REQUEST_TYPES = [
  'cache.upload.request',
  'cache.upload.complete',
  'cache.user.restore.request',
  'cache.user.save.request',
  'cache.user.save.complete',
  'provenance.upload.request',
  'provenance.upload.complete',
  'event.emit',
  'agent.api.request',
] as const;

/** Whether `type` is one of the storage and event requests. */
export function isStorageRequestType(type: string): boolean {
  return (STORAGE_REQUEST_TYPES as readonly string[]).includes(type);
}

export type StorageRequest =
  | z.infer<typeof cacheUploadRequestSchema>
  | z.infer<typeof cacheUploadCompleteSchema>
  | z.infer<typeof cacheUserRestoreRequestSchema>
  | z.infer<typeof cacheUserSaveRequestSchema>
  | z.infer<typeof cacheUserSaveCompleteSchema>
  | z.infer<typeof provenanceUploadRequestSchema>
  | z.infer<typeof provenanceUploadCompleteSchema>
  | z.infer<typeof eventEmitSchema>
  | z.infer<typeof agentApiRequestSchema>;
