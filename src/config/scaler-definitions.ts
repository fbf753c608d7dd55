import { hostname } from 'node:os';
import { z } from 'zod';
import { agentProperties, bareMetalAgentSchema, compileAgentLaunch, containerAgentSchema, selfReportedLabels } from './agent-launch.ts';
import type { AgentLaunch } from './agent-launch.ts';
import type { AgentResources, LabelSet } from '../../actors/scaler/ports.ts';

const label = z.string().min(1).max(256).regex(/^\S+$/, 'a label has no whitespace');
const resources = z.object({ cpu: z.number().min(0).default(0), memoryBytes: z.number().int().min(0).default(0) }).strict();
const warmPool = z.object({ size: z.number().int().min(0).max(100), idleTimeoutSeconds: z.number().int().min(1).default(300) }).strict();
const labelSet = z
  .object({
    labels: z.array(label).default([]),
    mandatoryLabels: z.array(label).default([]),
    resources: resources.optional(),
    warmPool: warmPool.optional(),
  })
  .strict();

const common = {
  name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'lowercase letters, digits and -'),
  maxAgents: z.number().int().min(1).max(1000).default(4),
  maxCpu: z.number().positive().optional(),
  maxMemoryBytes: z.number().int().positive().optional(),
  /** Default reservation of each agent when the label set names none. */
  resources: resources.optional(),
  /** Without label sets the backend offers one: the self-reported labels plus `labels`. */
  labels: z.array(label).default([]),
  labelSets: z.array(labelSet).optional(),
};

/** The reference agent's program in the default image; `agent …` arguments are appended. */
const REFERENCE_IMAGE_COMMAND = ['node', '--no-node-snapshot', '--import', 'tsx', '/opt/switchyard/src/cli/main.ts'];

const bareMetal = z
  .object({
    type: z.literal('bare-metal'),
    ...common,
    /**
     * The agent each spawn starts. `{kind: "reference"}` runs this checkout's `switchyard agent`;
     * `{kind: "kici", command, env?, workingDir?}` runs a KiCI agent install. @default {kind: "reference"}
     */
    agent: bareMetalAgentSchema,
  })
  .strict();
const container = z
  .object({
    type: z.literal('container'),
    ...common,
    socketPath: z.string().min(1).optional(),
    host: z.string().regex(/^(tcp|http|https):\/\//, 'a tcp://, http:// or https:// URL').optional(),
    image: z.string().min(1),
    /** The program that runs `switchyard` in the image (reference agent only). @default node … /opt/switchyard/src/cli/main.ts */
    command: z.array(z.string().min(1)).min(1).optional(),
    /** `{kind: "kici", command?, env?}` runs a KiCI agent image instead. @default {kind: "reference"} */
    agent: containerAgentSchema,
    workingDir: z.string().min(1).optional(),
    network: z.string().min(1).default('host'),
    binds: z.array(z.string().min(1)).default([]),
    ulimits: z.array(z.object({ name: z.string().min(1), soft: z.number().int(), hard: z.number().int() }).strict()).default([]),
    isolation: z.object({ allowlist: z.array(z.string()).default([]), denyAll: z.boolean().default(false) }).strict().optional(),
    stopGraceSeconds: z.number().int().min(0).max(300).default(5),
  })
  .strict()
  .refine((def) => def.agent.kind === 'reference' || def.command === undefined, {
    path: ['command'],
    message: 'command starts the reference agent; a KiCI agent takes agent.command',
  });

export const scalerDefinitionsSchema = z.array(z.discriminatedUnion('type', [bareMetal, container])).superRefine((defs, ctx) => {
  const names = defs.map((def) => def.name);
  const repeated = names.filter((name, i) => names.indexOf(name) !== i);
  if (repeated.length > 0) ctx.addIssue({ code: 'custom', message: `scaler names must be unique: ${[...new Set(repeated)].join(', ')}` });
});

type RawDefinition = z.infer<typeof scalerDefinitionsSchema>[number];

interface Compiled {
  name: string;
  maxAgents: number;
  maxCpu: number | null;
  maxMemoryBytes: number | null;
  labelSets: LabelSet[];
  agent: AgentLaunch;
}

export type BareMetalDefinition = Compiled & { type: 'bare-metal' };
export type ContainerDefinition = Compiled &
  Omit<z.infer<typeof container>, 'labels' | 'labelSets' | 'resources' | 'maxCpu' | 'maxMemoryBytes' | 'socketPath' | 'host' | 'workingDir' | 'isolation' | 'command' | 'agent'> & {
    command: string[];
    socketPath: string | null;
    host: string | null;
    workingDir: string | null;
    isolation: { allowlist: string[]; denyAll: boolean } | null;
  };
export type ScalerDefinition = BareMetalDefinition | ContainerDefinition;

/** Every label set carries what its agent reports by itself; a container's hostname is random, so no `kici:host:*`. */
function compileLabelSets(def: RawDefinition, agent: AgentLaunch, host: string): LabelSet[] {
  const fallback: AgentResources | null = def.resources ? { cpu: def.resources.cpu, memoryBytes: def.resources.memoryBytes } : null;
  const sets = def.labelSets ?? [{ labels: def.labels, mandatoryLabels: [] }];
  const selfReported = selfReportedLabels(agent, def.type === 'container' ? null : host);
  return sets.map((set) => ({
    labels: [...new Set([...selfReported, ...set.labels])],
    mandatoryLabels: set.mandatoryLabels ?? [],
    properties: agentProperties(agent),
    resources: set.resources ? { cpu: set.resources.cpu, memoryBytes: set.resources.memoryBytes } : fallback,
    warmPool: set.warmPool ? { size: set.warmPool.size, idleTimeoutSeconds: set.warmPool.idleTimeoutSeconds } : null,
  }));
}

/** Parsed definitions → backend definitions with their label sets complete. */
export function compileScalerDefinitions(raw: unknown, host: string = hostname()): ScalerDefinition[] {
  const parsed = scalerDefinitionsSchema.parse(raw);
  return parsed.map((def): ScalerDefinition => {
    const agent = compileAgentLaunch(def.agent);
    const limits = { maxAgents: def.maxAgents, maxCpu: def.maxCpu ?? null, maxMemoryBytes: def.maxMemoryBytes ?? null };
    const base: Compiled = { name: def.name, ...limits, labelSets: compileLabelSets(def, agent, host), agent };
    if (def.type === 'bare-metal') return { ...base, type: 'bare-metal' };
    const { labels: _l, labelSets: _s, resources: _r, maxCpu: _c, maxMemoryBytes: _m, agent: _a, ...rest } = def;
    const optional = { socketPath: def.socketPath ?? null, host: def.host ?? null, workingDir: def.workingDir ?? null, isolation: def.isolation ?? null };
    return { ...rest, ...base, ...optional, command: def.command ?? REFERENCE_IMAGE_COMMAND };
  });
}

/** The embedded default (docs/architecture.md#start-and-stop): one bare-metal backend on this host. */
export function defaultScalerDefinitions(extraLabels: string[], host: string = hostname()): ScalerDefinition[] {
  return compileScalerDefinitions([{ type: 'bare-metal', name: 'bare-metal', labels: extraLabels }], host);
}

/** Host variables an agent and its steps need; the coordinator's other variables (secrets) stay out. */
export const PASSED_HOST_VARIABLES = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'] as const;

export function passedHostEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of PASSED_HOST_VARIABLES) {
    const value = env[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}
