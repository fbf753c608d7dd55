export { loadConfig, type CompiledConfig } from './config.ts';
export { ConfigError } from './errors.ts';
export { LOG_LEVELS, type LogLevel } from './env.ts';
