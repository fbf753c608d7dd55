/**
 * The code that runs inside each fresh context, as the body of `context.evalClosure` with
 * `$0` = the event as JSON text (or undefined), `$1` = the expression source, `$2` = the expectation.
 *
 * It captures every intrinsic it needs before any expression code runs, so an expression that
 * patches `JSON`, `Reflect` or a prototype cannot change how its own result is checked. Every
 * ordinary failure is caught here and returned as `{ ok: false, message }`; only a timeout or the
 * memory limit (both terminate the isolate's execution) reach the host as a thrown error.
 *
 * A string result comes back as `{ ok: true, value }`; a string map as `{ ok: true, json }`, JSON
 * text built from primitive strings only, so copying it out never runs expression code.
 */
export const HARNESS_SOURCE = String.raw`
'use strict';
const { parse, stringify } = JSON;
const { getPrototypeOf, ownKeys, getOwnPropertyDescriptor, defineProperty } = Reflect;
const { hasOwn } = Object;
const { isArray } = Array;
const objectPrototype = Object.prototype;
const globalEval = eval;

const fail = (message) => ({ ok: false, message });

function kind(value) {
  if (value === null) return 'null';
  if (typeof value === 'object') return isArray(value) ? 'an array' : 'an object';
  if (typeof value === 'undefined') return 'undefined';
  return 'a ' + typeof value;
}

function describeThrown(thrown) {
  try {
    if (thrown !== null && (typeof thrown === 'object' || typeof thrown === 'function')) {
      const name = thrown.name;
      const message = thrown.message;
      if (typeof message !== 'string') return 'threw ' + kind(thrown) + ' that is not an Error';
      return (typeof name === 'string' && name !== '' ? name : 'Error') + ': ' + message;
    }
    return 'threw ' + (typeof thrown === 'string' ? stringify(thrown) : String(thrown));
  } catch {
    return 'threw a value that could not be described';
  }
}

function checkString(value) {
  if (typeof value === 'string') return { ok: true, value };
  return fail('expected a string, got ' + kind(value));
}

function checkStringMap(value) {
  if (typeof value !== 'object' || value === null || isArray(value)) {
    return fail('expected a plain object of strings, got ' + kind(value));
  }
  const prototype = getPrototypeOf(value);
  if (prototype !== objectPrototype && prototype !== null) {
    return fail('expected a plain object of strings, got an object with a custom prototype');
  }
  const keys = ownKeys(value);
  let json = '';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (typeof key !== 'string') return fail('expected string keys, got ' + String(key));
    if (key === '__proto__') return fail('the key "__proto__" is not allowed');
    const descriptor = getOwnPropertyDescriptor(value, key);
    if (descriptor === undefined) continue;
    const name = stringify(key);
    if (!hasOwn(descriptor, 'value')) return fail('property ' + name + ' is a getter or setter, expected a string value');
    if (!descriptor.enumerable) return fail('property ' + name + ' is not enumerable');
    const item = descriptor.value;
    if (typeof item !== 'string') return fail('value of ' + name + ' is ' + kind(item) + ', expected a string');
    json += (json === '' ? '' : ',') + name + ':' + stringify(item);
  }
  return { ok: true, json: '{' + json + '}' };
}

function isThenable(value) {
  return typeof value === 'object' && value !== null && typeof value.then === 'function';
}

function run(eventJson, expression, expect) {
  const event = eventJson === undefined ? undefined : parse(eventJson);
  defineProperty(globalThis, 'event', { value: event, writable: true, configurable: true });
  let fn;
  try {
    fn = globalEval('(' + expression + '\n)');
  } catch (thrown) {
    return fail(describeThrown(thrown));
  }
  if (typeof fn !== 'function') return fail('the expression must evaluate to a function, got ' + kind(fn));
  try {
    const result = fn(event);
    if (typeof result === 'function') return fail('returned a function');
    if (isThenable(result)) return fail('returned a promise or thenable; inline expressions must be synchronous');
    return expect === 'string' ? checkString(result) : checkStringMap(result);
  } catch (thrown) {
    return fail(describeThrown(thrown));
  }
}

return run($0, $1, $2);
`;

/** What the harness hands back, before the host has checked it. */
export type HarnessOutcome =
  | { ok: true; value: string | Record<string, string> }
  | { ok: false; message: string };

/**
 * Checks the copied-out harness result again on the host side. The harness already enforced the
 * contract; this guards the host against a harness bug, never trusts the shape blindly.
 */
export function decodeHarnessOutcome(raw: unknown, expect: 'string' | 'stringMap'): HarnessOutcome {
  if (!isRecord(raw)) return { ok: false, message: 'the sandbox returned an unreadable result' };
  if (raw.ok === false && typeof raw.message === 'string') return { ok: false, message: raw.message };
  if (raw.ok !== true) return { ok: false, message: 'the sandbox returned an unreadable result' };
  if (expect === 'string' && typeof raw.value === 'string') return { ok: true, value: raw.value };
  if (expect === 'stringMap' && typeof raw.json === 'string') {
    const parsed: unknown = JSON.parse(raw.json);
    if (isStringRecord(parsed)) return { ok: true, value: parsed };
  }
  return { ok: false, message: 'the sandbox returned a result of the wrong type' };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every((item) => typeof item === 'string');
}
