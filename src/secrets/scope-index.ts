/**
 * Which scopes hold at least one secret: read once, and again after any change — one made here,
 * a peer's signal (`secrets` on the broadcast channel, sent in the transaction of its write), a
 * reconnect of the listener, and the peers' poll, which bounds how stale a lost signal leaves it.
 * A dispatch whose scopes hold none skips the read of secret rows (most dispatches of most users).
 */
export class SecretScopeIndex {
  private scopes: Promise<Set<string>> | null = null;

  constructor(private readonly load: () => Promise<readonly string[]>) {}

  /** The scopes of `wanted` that hold a secret; none means there is nothing to read. */
  async holding(wanted: Iterable<string>): Promise<string[]> {
    const known = await this.current();
    return [...wanted].filter((scope) => known.has(scope));
  }

  /** Forgets what was read: the next dispatch reads the scopes again. */
  invalidate(): void {
    this.scopes = null;
  }

  private current(): Promise<Set<string>> {
    if (this.scopes) return this.scopes;
    const loading = this.load().then((list) => new Set(list));
    this.scopes = loading;
    // A failed read is not kept: the dispatch that asked fails with it, the next one reads again.
    loading.catch(() => {
      if (this.scopes === loading) this.scopes = null;
    });
    return loading;
  }
}
