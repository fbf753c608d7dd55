import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { getStateNodes, toDirectedGraph } from 'xstate/graph';
import type { DirectedGraphNode } from 'xstate/graph';
import { CONCURRENCY_MACHINE_ID, CONCURRENCY_MACHINE_VERSION, concurrencyMachine } from '../machines/concurrency.machine.ts';
import { JOB_MACHINE_ID, JOB_MACHINE_VERSION, jobMachine } from '../machines/job.machine.ts';
import { RUN_MACHINE_ID, RUN_MACHINE_VERSION, runMachine } from '../machines/run.machine.ts';
import { SCALER_MACHINE_ID, SCALER_MACHINE_VERSION, scalerMachine } from '../machines/scaler.machine.ts';
import { SCALER_AGENT_MACHINE_ID, SCALER_AGENT_MACHINE_VERSION, scalerAgentMachine } from '../machines/scaler-agent.machine.ts';

export interface GraphNode {
  /** The state node id, e.g. `job.assigned.running`; the root is the machine id. */
  id: string;
  parent: string | null;
  key: string;
  type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  /** The parent enters this child first. */
  initial: boolean;
  description: string | null;
}

export interface GraphEdge {
  id: string;
  source: string;
  /** Equals `source` for a targetless transition (kind `internal`). */
  target: string;
  /** The event type, or `always` for an eventless transition. */
  event: string;
  guard: string | null;
  actions: string[];
  kind: 'external' | 'internal' | 'always';
}

export interface MachineGraph {
  id: string;
  version: number;
  nodes: GraphNode[];
  edges: GraphEdge[];
}

type Transition = AnyStateNode['always'] extends (infer T)[] | undefined ? T : never;

function nameOf(ref: unknown): string | null {
  if (ref === undefined || ref === null) return null;
  if (typeof ref === 'string') return ref;
  if (typeof ref === 'function') return ref.name || 'inline';
  if (typeof ref === 'object' && 'type' in ref && typeof ref.type === 'string') return ref.type;
  return 'inline';
}

function edgeOf(id: string, source: AnyStateNode, target: AnyStateNode | null, transition: Transition, event: string): GraphEdge {
  const kind: GraphEdge['kind'] = event === 'always' ? 'always' : target === null ? 'internal' : 'external';
  return {
    id,
    source: source.id,
    target: (target ?? source).id,
    event,
    guard: nameOf(transition.guard),
    actions: transition.actions.map(nameOf).filter((name): name is string => name !== null),
    kind,
  };
}

/** `on` transitions from xstate/graph's directed graph (a targetless one points at its source). */
function eventEdges(graph: DirectedGraphNode, out: GraphEdge[]): void {
  for (const edge of graph.edges) {
    const transition = edge.transition as Transition;
    const target = transition.target === undefined ? null : edge.target;
    out.push(edgeOf(edge.id, edge.source, target, transition, String(transition.eventType)));
  }
  for (const child of graph.children) eventEdges(child, out);
}

/** Eventless (`always`) transitions, which the directed graph does not list. */
function alwaysEdges(node: AnyStateNode, out: GraphEdge[]): void {
  (node.always ?? []).forEach((transition: Transition, index: number) => {
    const targets: readonly AnyStateNode[] = transition.target ?? [];
    if (targets.length === 0) out.push(edgeOf(`${node.id}:always:${index}:0`, node, null, transition, 'always'));
    targets.forEach((target, n) => out.push(edgeOf(`${node.id}:always:${index}:${n}`, node, target, transition, 'always')));
  });
}

/** The statechart of `machine` as plain nodes and edges (for the visualizer and `GET /api/v1/machines`). */
export function machineGraph(machine: AnyStateMachine, version: number): MachineGraph {
  const all = [machine.root, ...getStateNodes(machine.root)];
  const nodes = all.map((node: AnyStateNode): GraphNode => {
    const parent = node.parent ?? null;
    return {
      id: node.id,
      parent: parent?.id ?? null,
      key: node.key,
      type: node.type,
      initial: parent !== null && parent.initial?.target.some((target: AnyStateNode) => target === node) === true,
      description: node.description ?? null,
    };
  });
  const edges: GraphEdge[] = [];
  eventEdges(toDirectedGraph(machine), edges);
  for (const node of all) alwaysEdges(node, edges);
  return { id: machine.id, version, nodes, edges };
}

let cached: MachineGraph[] | null = null;

/** Every chart this build runs: run, job, concurrency, scaler and its agents (computed once). */
export function machineGraphs(): MachineGraph[] {
  cached ??= [
    machineGraph(runMachine, RUN_MACHINE_VERSION),
    machineGraph(jobMachine, JOB_MACHINE_VERSION),
    machineGraph(concurrencyMachine, CONCURRENCY_MACHINE_VERSION),
    machineGraph(scalerMachine, SCALER_MACHINE_VERSION),
    machineGraph(scalerAgentMachine, SCALER_AGENT_MACHINE_VERSION),
  ];
  return cached;
}

export const MACHINE_IDS = [RUN_MACHINE_ID, JOB_MACHINE_ID, CONCURRENCY_MACHINE_ID, SCALER_MACHINE_ID, SCALER_AGENT_MACHINE_ID] as const;
