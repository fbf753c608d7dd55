import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** A JSON object frame as it crossed the wire. */
export type WireFrame = { type: string } & Record<string, unknown>;

export interface WireRecord {
  t: number;
  conn: number;
  dir: 'A->O' | 'O->A';
  msg: WireFrame;
}

const recordSchema = z.object({
  t: z.number(),
  conn: z.number(),
  dir: z.enum(['A->O', 'O->A']),
  msg: z.looseObject({ type: z.string() }),
});

const beside = resolve(dirname(fileURLToPath(import.meta.url)), '../../../shared');
const SHARED = existsSync(beside) ? beside : '/work/shared';

/** The recorded session of the stock KiCI agent 0.1.24 with the reference orchestrator. */
export const KICI_WIRE_FIXTURE = join(SHARED, 'fixtures/kici-agent-wire/kici-0.1.24-session.jsonl');

let cached: readonly WireRecord[] | undefined;

/** Every line of the fixture, in order, read once per process. */
export function wireRecords(): readonly WireRecord[] {
  cached ??= readFileSync(KICI_WIRE_FIXTURE, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, index) => {
      const parsed = recordSchema.safeParse(JSON.parse(line));
      if (!parsed.success) throw new Error(`${KICI_WIRE_FIXTURE}:${index + 1}: not a wire record: ${parsed.error.message}`);
      return parsed.data;
    });
  return cached;
}

/** A fresh deep copy of the first agent → orchestrator frame of `type` that `where` accepts. */
export function agentTemplate(type: string, where: (frame: WireFrame) => boolean = () => true): WireFrame {
  const found = wireRecords().find((record) => record.dir === 'A->O' && record.msg.type === type && where(record.msg));
  if (!found) throw new Error(`the KiCI wire fixture has no ${type} frame of the kind asked for`);
  return structuredClone(found.msg);
}

/** `frame[key]` when it is a JSON object. */
export function objectAt(frame: Record<string, unknown>, key: string): Record<string, unknown> | undefined {
  const value = frame[key];
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** The field set of a frame: its keys, and those of its `data` and `context` objects, sorted. */
export function fieldSet(frame: Record<string, unknown>): string {
  const nested = ['data', 'context'].flatMap((key) => {
    const inner = objectAt(frame, key);
    return inner ? Object.keys(inner).map((name) => `${key}.${name}`) : [];
  });
  return [...Object.keys(frame), ...nested].sort().join(',');
}
