import type { LockMatrixEntry, LockMatrixScalar, LockStaticMatrix } from './lock.types.ts';

/** More combinations than this fail the job with `matrix_expansion` (docs/lockfile.md#jobs). */
export const MAX_MATRIX_COMBINATIONS = 256;

/**
 * Units of work (a combination built, an exclude key set checked) the expansion may spend.
 * Excludes that remove almost all of a huge product would otherwise cost time in proportion
 * to the product, not to the result.
 */
const EXPANSION_BUDGET = 200_000;

/** A map-form key with its values as text. */
type Axis = [key: string, values: string[]];

/** One matrix combination; keys in matrix key order, values as text. */
export type MatrixCombination = Record<string, string>;

export type MatrixExpansion = { ok: true; combinations: MatrixCombination[] } | { ok: false; message: string };

export interface StaticMatrixSpec {
  matrix: LockStaticMatrix;
  include?: LockMatrixEntry[] | undefined;
  exclude?: LockMatrixEntry[] | undefined;
}

/** Child job name: `<job> (<v1>, <v2>, …)` with values in key order. */
export function matrixChildName(baseName: string, combination: MatrixCombination): string {
  return `${baseName} (${Object.values(combination).join(', ')})`;
}

/** The lock-file job a job key was planned from: a matrix child's `<job> (<v1>, …)` → `<job>`; any other key as it is. */
export function lockJobNameOf(jobKey: string): string {
  return jobKey.replace(/ \(.*\)$/, '');
}

/**
 * Expands a static matrix (docs/lockfile.md#jobs): the map form is the cartesian product in key order,
 * the array form lists combinations (a scalar `v` is `{value: v}`); `exclude` removes every
 * combination agreeing on all of an entry's keys, then `include` entries are appended; duplicates
 * are dropped. Zero combinations or more than 256 is a failure, never a throw.
 */
export function expandStaticMatrix(spec: StaticMatrixSpec): MatrixExpansion {
  const { values } = spec.matrix;
  const listed = Array.isArray(values) ? values.map(asEntry) : [];
  const axes = Array.isArray(values) ? [] : Object.entries(values).map(([key, axis]): Axis => [key, axis.map(asText)]);
  const dimensions = Array.isArray(values) ? keysInOrder(listed) : axes.map(([key]) => key);
  const order = keyOrderer(dimensions);
  const excludes = new Excludes((spec.exclude ?? []).map(order), dimensions);
  const found = new Collector();
  const work = { left: EXPANSION_BUDGET };

  for (const entry of listed) {
    work.left -= 1 + excludes.size;
    if (work.left < 0) break;
    const combination = order(entry);
    if (!excludes.removes(combination) && !found.add(combination)) break;
  }
  if (!product(axes, excludes, found, work) || work.left < 0) {
    return { ok: false, message: `the matrix is too large to expand (over ${EXPANSION_BUDGET} steps)` };
  }
  for (const entry of spec.include ?? []) {
    if (!found.add(order(entry))) break;
  }
  return verdict(found.combinations);
}

function verdict(combinations: MatrixCombination[]): MatrixExpansion {
  if (combinations.length === 0) return { ok: false, message: 'the matrix expands to zero combinations' };
  if (combinations.length > MAX_MATRIX_COMBINATIONS) {
    return { ok: false, message: `the matrix expands to more than ${MAX_MATRIX_COMBINATIONS} combinations` };
  }
  return { ok: true, combinations };
}

/** Unique, non-empty combinations in arrival order; `add` answers false once past the limit. */
class Collector {
  readonly combinations: MatrixCombination[] = [];
  private readonly seen = new Set<string>();

  add(combination: MatrixCombination): boolean {
    if (this.combinations.length > MAX_MATRIX_COMBINATIONS) return false;
    const entries = Object.entries(combination);
    if (entries.length === 0) return true;
    const signature = JSON.stringify(entries.sort(([a], [b]) => (a < b ? -1 : 1)));
    if (!this.seen.has(signature)) {
      this.seen.add(signature);
      this.combinations.push(combination);
    }
    return this.combinations.length <= MAX_MATRIX_COMBINATIONS;
  }
}

interface ExcludeGroup {
  keys: string[];
  /** Index of the entry's last matrix key; an entry with a key outside the matrix never matches the product. */
  lastDimension: number;
  signatures: Set<string>;
}

/** Exclude entries grouped by key set, so a combination is checked once per key set, not per entry. */
class Excludes {
  private readonly groups: ExcludeGroup[];

  constructor(entries: readonly MatrixCombination[], dimensions: readonly string[]) {
    const rank = new Map(dimensions.map((key, index) => [key, index]));
    const byShape = new Map<string, ExcludeGroup>();
    for (const entry of entries) {
      const keys = Object.keys(entry);
      if (keys.length === 0) continue;
      const shape = JSON.stringify(keys);
      let group = byShape.get(shape);
      if (!group) {
        group = { keys, lastDimension: Math.max(...keys.map((key) => rank.get(key) ?? Infinity)), signatures: new Set() };
        byShape.set(shape, group);
      }
      group.signatures.add(signatureOf(group.keys, entry));
    }
    this.groups = [...byShape.values()];
  }

  get size(): number {
    return this.groups.length;
  }

  /** True when `combination` has every key of some entry, with the same values. */
  removes(combination: MatrixCombination): boolean {
    return this.groups.some((group) => groupRemoves(group, combination));
  }

  /** Key sets that can first match once dimension `depth` is assigned. */
  completedAt(depth: number): ExcludeGroup[] {
    return this.groups.filter((group) => group.lastDimension === depth);
  }
}

function groupRemoves(group: ExcludeGroup, combination: MatrixCombination): boolean {
  if (!group.keys.every((key) => Object.hasOwn(combination, key))) return false;
  return group.signatures.has(signatureOf(group.keys, combination));
}

function signatureOf(keys: readonly string[], combination: MatrixCombination): string {
  return JSON.stringify(keys.map((key) => combination[key]));
}

/**
 * Depth-first cartesian product; a branch whose assigned keys already match an exclude entry is
 * cut whole. Returns false only when the work budget ran out before the result was decided.
 */
function product(axes: readonly Axis[], excludes: Excludes, found: Collector, work: { left: number }): boolean {
  const checksAt = axes.map((_, depth) => excludes.completedAt(depth));
  let full = false;
  const visit = (depth: number, partial: MatrixCombination): boolean => {
    const checks = checksAt[depth - 1] ?? [];
    work.left -= 1 + checks.length;
    if (full || work.left < 0) return false;
    if (checks.some((group) => groupRemoves(group, partial))) return true;
    const axis = axes[depth];
    if (!axis) {
      full = !found.add(partial);
      return !full;
    }
    const [key, axisValues] = axis;
    return axisValues.every((value) => visit(depth + 1, { ...partial, [key]: value }));
  };
  if (axes.length > 0) visit(0, {});
  return full || work.left >= 0;
}

function asEntry(element: LockMatrixScalar | LockMatrixEntry): LockMatrixEntry {
  return typeof element === 'object' && element !== null ? element : { value: element };
}

function asText(value: LockMatrixScalar): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Puts the matrix keys first, in matrix order, then keys only this entry has, as written. */
function keyOrderer(dimensions: readonly string[]): (entry: LockMatrixEntry) => MatrixCombination {
  const rank = new Map(dimensions.map((key, index) => [key, index]));
  return (entry) => {
    const ranked = Object.entries(entry).map(([key, value], written) => ({
      key,
      text: asText(value),
      place: rank.get(key) ?? dimensions.length + written,
    }));
    ranked.sort((a, b) => a.place - b.place);
    // fromEntries defines own properties, so a key such as `__proto__` stays a value.
    return Object.fromEntries(ranked.map(({ key, text }) => [key, text]));
  };
}

function keysInOrder(entries: readonly LockMatrixEntry[]): string[] {
  const keys = new Set<string>();
  for (const entry of entries) for (const key of Object.keys(entry)) keys.add(key);
  return [...keys];
}
