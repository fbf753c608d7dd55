import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { autoLabels } from '../../lib/self-reported-labels.ts';
import type { LabelSet } from '../../actors/scaler/ports.ts';

/**
 * Which agent a backend starts: `reference` (`switchyard agent`: shell `run:` steps) or `kici`
 * (a KiCI agent install: TypeScript steps and init jobs, configured by its environment).
 */
export type AgentKind = 'reference' | 'kici';

/** A KiCI agent as a backend starts it. */
export interface KiciLaunch {
  kind: 'kici';
  /** Program and arguments; null in a container means the image's own entrypoint and command. */
  command: string[] | null;
  /** Extra variables; the contract variables and the ownership marks are the scaler's. */
  env: Record<string, string>;
  /** Bare metal: the agent's working directory; null is its own work dir under the scaler's state dir. */
  workingDir: string | null;
}

export type AgentLaunch = { kind: 'reference' } | KiciLaunch;

export const REFERENCE_AGENT: AgentLaunch = { kind: 'reference' };

/** Set by the scaler for each spawned KiCI agent (docs/protocol.md#endpoints-and-transport). */
export const KICI_CONTRACT_VARIABLES = ['KICI_ORCHESTRATOR_URL', 'KICI_AGENT_TOKEN', 'KICI_AGENT_ID', 'KICI_LABELS'] as const;

/**
 * The `KICI_*` names the stock agent reads, as its configuration reference lists them. It refuses
 * to start with any other `KICI_*` variable in its environment (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with).
 */
export const KNOWN_KICI_VARIABLES: ReadonlySet<string> = new Set([
  ...KICI_CONTRACT_VARIABLES,
  ...['KICI_ROLES', 'KICI_PORT', 'KICI_PROPERTIES', 'KICI_DEV', 'KICI_ENV_FILE', 'KICI_TMPDIR', 'KICI_LOG_LEVEL', 'KICI_LOG_DIR', 'KICI_LOG_FORMAT'],
  ...['KICI_LOG_MAX_SIZE', 'KICI_LOG_RETENTION_DAYS', 'KICI_CONCURRENCY_WAIT_TIMEOUT_MS', 'KICI_JOB_HEARTBEAT_INTERVAL_MS', 'KICI_BACKPRESSURE_MODE'],
  ...['KICI_AGENT_BETWEEN_JOBS_RESET_COMMAND', 'KICI_AGENT_BETWEEN_JOBS_RESET_RUN_ON', 'KICI_AGENT_BETWEEN_JOBS_RESET_TIMEOUT_MS', 'KICI_AGENT_COMMAND'],
  ...['KICI_AGENT_DRAIN_ON_RESET_FAILURE', 'KICI_AGENT_IS_ORCHESTRATOR_HOST', 'KICI_AGENT_ORPHAN_CLEANUP', 'KICI_AGENT_PAYLOAD_DIR', 'KICI_ALLOW_INSTALL_SCRIPTS'],
  ...['KICI_CONTAINER_BUILD_CLI', 'KICI_DEFAULT_STEP_TIMEOUT_MS', 'KICI_DOCKER_KEEP_FAILED', 'KICI_EXECUTION_MODE', 'KICI_GITHUB_TOKEN', 'KICI_HOST_INSTALL_REGISTRIES'],
  ...['KICI_IN_PLACE', 'KICI_JOB_IMAGE_AGENT', 'KICI_MAX_LOG_SIZE_BYTES', 'KICI_RUNNER_DEBUG_STDIO', 'KICI_RUNNER_USER', 'KICI_RUNTIME_IMAGE', 'KICI_RUNTIME_NODE_SOURCE'],
  ...['KICI_SANDBOX', 'KICI_SANDBOX_HARDENED', 'KICI_SANDBOX_MEMORY_BYTES', 'KICI_SANDBOX_NANO_CPUS', 'KICI_SANDBOX_NETWORK', 'KICI_SANDBOX_NETWORK_ISOLATION'],
  ...['KICI_SANDBOX_PIDS_LIMIT', 'KICI_SANDBOX_READONLY_ROOTFS', 'KICI_SANDBOX_USER', 'KICI_SCALER_IDLE_TIMEOUT', 'KICI_SCALER_PENDING_DISPATCH_TIMEOUT', 'KICI_TRUSTED_ENV'],
]);

const ROLES = ['builder', 'init-runner'] as const;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The roles a KiCI agent takes from `KICI_ROLES`: unset or `all` = every role, empty = none. */
export function kiciRoles(value: string | undefined): string[] {
  const named = (value ?? 'all').split(',').map((role) => role.trim()).filter(Boolean);
  return named.includes('all') ? [...ROLES] : [...new Set(named)];
}

function checkEnv(env: Record<string, string>, ctx: z.RefinementCtx): void {
  for (const name of Object.keys(env)) {
    const path = ['env', name];
    if (!ENV_NAME.test(name)) ctx.addIssue({ code: 'custom', path, message: `${name} is not an environment variable name (letters, digits and _)` });
    else if ((KICI_CONTRACT_VARIABLES as readonly string[]).includes(name)) ctx.addIssue({ code: 'custom', path, message: `${name} is set by the scaler for each agent` });
    else if (name.startsWith('SWITCHYARD_')) ctx.addIssue({ code: 'custom', path, message: `${name}: SWITCHYARD_* variables are the scaler's ownership marks` });
    else if (name.startsWith('KICI_') && !KNOWN_KICI_VARIABLES.has(name)) {
      ctx.addIssue({ code: 'custom', path, message: `${name} is not a variable the KiCI agent knows, and it refuses to start with an unknown KICI_* variable` });
    }
  }
  const unknownRoles = kiciRoles(env['KICI_ROLES']).filter((role) => !(ROLES as readonly string[]).includes(role));
  if (unknownRoles.length > 0) ctx.addIssue({ code: 'custom', path: ['env', 'KICI_ROLES'], message: `unknown roles ${unknownRoles.join(', ')} (builder, init-runner, all, or empty)` });
}

/** An absolute path must name an executable file now; a bare name is looked up on PATH when the agent starts. */
function checkProgram(command: string[], ctx: z.RefinementCtx): void {
  const program = command[0] ?? '';
  const path = ['command', 0];
  if (!isAbsolute(program)) {
    if (program.includes('/')) ctx.addIssue({ code: 'custom', path, message: `${program}: use an absolute path or a program name found on PATH` });
    return;
  }
  try {
    accessSync(program, constants.X_OK);
    if (!statSync(program).isFile()) ctx.addIssue({ code: 'custom', path, message: `${program} is not an executable file on this host (a directory)` });
  } catch (thrown) {
    const code = (thrown as NodeJS.ErrnoException).code ?? 'error';
    ctx.addIssue({ code: 'custom', path, message: `${program} is not an executable file on this host (${code})` });
  }
}

function isDirectory(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

const commandError = 'the KiCI agent program, then its arguments, e.g. ["/opt/kici-agent/bin/kici-agent"]';
const command = z.array(z.string().min(1, 'an empty command argument'), { error: commandError }).min(1, commandError);
const agentKindError = { error: 'agent.kind is "reference" (the default) or "kici"' };

/** `{kind: "reference"}`: `switchyard agent`, which executes only shell `run:` steps. */
const reference = z.object({ kind: z.literal('reference') }).strict();

const kiciBareMetal = z
  .object({
    kind: z.literal('kici'),
    /** Program and arguments, e.g. `["/opt/kici-agent/bin/kici-agent"]`; an absolute program must be executable here. Required. */
    command,
    /** Extra variables: known `KICI_*` ones (`KICI_ROLES`, `KICI_LOG_LEVEL`, …) and any others. @default {} */
    env: z.record(z.string(), z.string()).default({}),
    /** Absolute working directory of the process. @default the agent's own work dir, removed when it is destroyed */
    workingDir: z.string().refine(isAbsolute, 'an absolute path').optional(),
  })
  .strict()
  .superRefine((agent, ctx) => {
    checkProgram(agent.command, ctx);
    checkEnv(agent.env, ctx);
    if (agent.workingDir !== undefined && !isDirectory(agent.workingDir)) ctx.addIssue({ code: 'custom', path: ['workingDir'], message: `${agent.workingDir} is not a directory on this host` });
  });

const kiciContainer = z
  .object({
    kind: z.literal('kici'),
    /** Program and arguments inside the image. @default the image's own entrypoint and command */
    command: command.optional(),
    /** Extra variables, as for bare metal. @default {} */
    env: z.record(z.string(), z.string()).default({}),
  })
  .strict()
  .superRefine((agent, ctx) => checkEnv(agent.env, ctx));

/** `agent` of a bare-metal backend. @default {kind: "reference"} */
export const bareMetalAgentSchema = z.discriminatedUnion('kind', [reference, kiciBareMetal], agentKindError).default({ kind: 'reference' });

/** `agent` of a container backend; its working directory is the backend's `workingDir`. @default {kind: "reference"} */
export const containerAgentSchema = z.discriminatedUnion('kind', [reference, kiciContainer], agentKindError).default({ kind: 'reference' });

export function compileAgentLaunch(raw: z.output<typeof bareMetalAgentSchema> | z.output<typeof containerAgentSchema>): AgentLaunch {
  if (raw.kind === 'reference') return REFERENCE_AGENT;
  return { kind: 'kici', command: raw.command ?? null, env: { ...raw.env }, workingDir: 'workingDir' in raw ? (raw.workingDir ?? null) : null };
}

/**
 * The labels the agent registers with by itself (docs/protocol.md#labels-executors-and-matching): os and arch, the host where it
 * is known (a container's hostname is random), and for a KiCI agent its `KICI_ROLES` roles.
 */
export function selfReportedLabels(agent: AgentLaunch, host: string | null): string[] {
  const labels = autoLabels(host ?? '').filter((label) => host !== null || !label.startsWith('kici:host:'));
  if (agent.kind === 'reference') return labels;
  return [...labels, ...kiciRoles(agent.env['KICI_ROLES']).map((role) => `kici:role:${role}`)];
}

/** `properties` the agent registers with: the reference agent declares its run steps; a KiCI agent sends none. */
export function agentProperties(agent: AgentLaunch): LabelSet['properties'] {
  return agent.kind === 'reference' ? { 'switchyard.runSteps': true } : {};
}

/** What the scaler knows of one spawn, for the KiCI agent's environment contract. */
export interface KiciSpawn {
  orchestratorUrl: string;
  token: string;
  agentId: string;
  /** Configured labels only: `KICI_LABELS` must not carry the reserved `kici:` prefix. */
  labels: string[];
}

/**
 * The stock agent's environment (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with): the configured `env`, then the contract
 * variables. `KICI_LABELS` is left out when there are none rather than sent empty.
 */
export function kiciContractEnv(agent: KiciLaunch, spawn: KiciSpawn): Record<string, string> {
  return {
    ...agent.env,
    KICI_ORCHESTRATOR_URL: spawn.orchestratorUrl,
    KICI_AGENT_TOKEN: spawn.token,
    KICI_AGENT_ID: spawn.agentId,
    ...(spawn.labels.length > 0 && { KICI_LABELS: spawn.labels.join(',') }),
  };
}

/** Drops every `KICI_*` variable the stock agent does not know, wherever it came from. */
export function withoutUnknownKici(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('KICI_') || KNOWN_KICI_VARIABLES.has(name)));
}
