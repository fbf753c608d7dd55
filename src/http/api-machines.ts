import { machineGraphs } from '../../visualize/graph.ts';
import { sendJson } from './respond.ts';
import type { Router } from './router.ts';

/** `GET /api/v1/machines`: every chart's nodes and edges, for the visualizer and tools. */
export function registerMachineRoutes(router: Router): void {
  router.on('GET', '/api/v1/machines', ({ res }) => sendJson(res, 200, { machines: machineGraphs() }));
}
