/**
 * A configuration value is missing or malformed. The coordinator refuses to start; fix the
 * environment variable named by `key` and start again.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';

  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}
