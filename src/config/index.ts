export { loadConfig, loadLogFormat, type CompiledConfig } from './config.ts';
export { ConfigError } from './errors.ts';
export { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from './env.ts';
