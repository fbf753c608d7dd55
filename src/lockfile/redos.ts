/**
 * Star height > 1: a repeating quantifier applied to a group that itself contains a repeating
 * quantifier (`(a+)+`, `(a*)*`, `(a|b*)+`, `(x{1,3})*`). Such patterns backtrack exponentially.
 * A quantifier repeats when its upper bound exceeds one and is not a fixed count (`?` and `{3}` do not).
 * The source is scanned lexically; whether it compiles at all is the caller's check.
 */
export function isReDoSProne(source: string): boolean {
  const stack: { containsRepeat: boolean }[] = [{ containsRepeat: false }];
  let atom: Atom = null;
  let i = 0;
  while (i < source.length) {
    const top = stack[stack.length - 1]!;
    const ch = source[i];
    if (ch === '\\') {
      i = skipEscape(source, i);
      atom = { group: false, containsRepeat: false };
    } else if (ch === '[') {
      i = skipClass(source, i);
      atom = { group: false, containsRepeat: false };
    } else if (ch === '(') {
      stack.push({ containsRepeat: false });
      i = skipGroupPrefix(source, i);
      atom = null;
    } else if (ch === ')' && stack.length > 1) {
      const closed = stack.pop()!;
      const parent = stack[stack.length - 1]!;
      parent.containsRepeat ||= closed.containsRepeat;
      atom = { group: true, containsRepeat: closed.containsRepeat };
      i += 1;
    } else if (ch === '|') {
      atom = null;
      i += 1;
    } else {
      const quantifier = readQuantifier(source, i);
      if (quantifier === null) {
        atom = { group: false, containsRepeat: false };
        i += 1;
        continue;
      }
      if (atom !== null && quantifier.repeats) {
        if (atom.group && atom.containsRepeat) return true;
        top.containsRepeat = true;
      }
      atom = null;
      i = quantifier.end;
    }
  }
  return false;
}

type Atom = { group: boolean; containsRepeat: boolean } | null;

const BRACED_ESCAPES = new Set(['u', 'p', 'P']);

function skipEscape(source: string, at: number): number {
  const letter = source[at + 1];
  if (letter !== undefined && BRACED_ESCAPES.has(letter) && source[at + 2] === '{') {
    return skipPast(source, at + 3, '}');
  }
  if (letter === 'k' && source[at + 2] === '<') return skipPast(source, at + 3, '>');
  return at + 2;
}

function skipClass(source: string, at: number): number {
  let i = at + 1;
  if (source[i] === '^') i += 1;
  while (i < source.length) {
    if (source[i] === '\\') i += 2;
    else if (source[i] === ']') return i + 1;
    else i += 1;
  }
  return i;
}

/** `(`, `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>` and modifier groups such as `(?i:`. */
function skipGroupPrefix(source: string, at: number): number {
  if (source[at + 1] !== '?') return at + 1;
  const next = source[at + 2];
  if (next === '<' && source[at + 3] !== '=' && source[at + 3] !== '!') return skipPast(source, at + 3, '>');
  if (next === '<') return at + 4;
  if (next === ':' || next === '=' || next === '!') return at + 3;
  return skipPast(source, at + 2, ':');
}

function skipPast(source: string, from: number, terminator: string): number {
  const end = source.indexOf(terminator, from);
  return end === -1 ? source.length : end + 1;
}

const BRACES = /^\{(\d+)(,(\d*))?\}/;

function readQuantifier(source: string, at: number): { repeats: boolean; end: number } | null {
  const ch = source[at];
  let end: number;
  let repeats: boolean;
  if (ch === '*' || ch === '+') {
    repeats = true;
    end = at + 1;
  } else if (ch === '?') {
    repeats = false;
    end = at + 1;
  } else if (ch === '{') {
    const braces = BRACES.exec(source.slice(at));
    if (braces === null) return null;
    const min = Number(braces[1]);
    const max = braces[2] === undefined ? min : braces[3] === '' ? Infinity : Number(braces[3]);
    repeats = max > 1 && max !== min;
    end = at + braces[0].length;
  } else {
    return null;
  }
  if (source[end] === '?') end += 1;
  return { repeats, end };
}
