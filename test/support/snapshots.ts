/** A stored run snapshot as release 4004 wrote it: each context's `spec` spread back into the context (actors/runs/snapshot-migration.ts goes the other way). */
export function asRelease4004(snapshot: unknown): unknown {
  const flat = (context: Record<string, unknown>) => {
    const { spec, ...rest } = context as { spec: Record<string, unknown> };
    return { ...spec, ...rest };
  };
  const persisted = snapshot as { context: Record<string, unknown>; children: Record<string, { snapshot: { context: Record<string, unknown> } }> };
  const children = Object.fromEntries(Object.entries(persisted.children).map(([key, child]) => [key, { ...child, snapshot: { ...child.snapshot, context: flat(child.snapshot.context) } }]));
  return { ...persisted, context: flat(persisted.context), children };
}
