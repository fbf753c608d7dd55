import type { JobDispatch, SequentialStep } from '../ws/messages.ts';
import { MASK, type SecretMasker } from './masking.ts';

export type Env = Record<string, string>;

/** The agent's own environment as a step sees it: every `KICI_*` and `SWITCHYARD_*` removed (docs/protocol.md#labels-executors-and-matching). */
export function stepBaseEnv(agentEnv: NodeJS.ProcessEnv): Env {
  const env: Env = {};
  for (const [name, value] of Object.entries(agentEnv)) {
    if (value === undefined || /^(KICI|SWITCHYARD)_/i.test(name)) continue;
    env[name] = value;
  }
  return env;
}

/** Base env, then `environmentVars`, `jobEnv`, then the step's `env`: later wins. Secrets are not exported. */
export function stepEnv(base: Env, dispatch: JobDispatch, step: SequentialStep): Env {
  return { ...base, ...dispatch.jobConfig.environmentVars, ...dispatch.jobConfig.jobEnv, ...step.env };
}

export interface ContextEnvVar {
  name: string;
  value: string;
  category: string;
}

const SENSITIVE_NAME = /TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL/i;
const AGENT_TOKEN = /kat_[0-9a-f]{64}/g;

/**
 * The env list of `job.context`, redacted as docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with asks the coordinator to: sensitive
 * names, agent tokens and dispatched secret values never leave the agent.
 */
export function contextEnvVars(base: Env, dispatch: JobDispatch, masker: SecretMasker): ContextEnvVar[] {
  const sources: [string, Env | undefined][] = [
    ['agent', base],
    ['environment', dispatch.jobConfig.environmentVars],
    ['job', dispatch.jobConfig.jobEnv],
  ];
  const vars: ContextEnvVar[] = [];
  for (const [category, env] of sources) {
    for (const [name, value] of Object.entries(env ?? {})) {
      const redacted = SENSITIVE_NAME.test(name) ? MASK : masker.mask(value).replace(AGENT_TOKEN, MASK);
      vars.push({ name, value: redacted, category });
    }
  }
  return vars;
}
