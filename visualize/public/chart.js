'use strict';
// Statechart diagrams: ELK lays out a machine graph (GET /api/v1/machines), this draws it as SVG.
{
  const { s: el, sectionPath } = window.SwitchyardCommon;
  const FONT = '12px system-ui, sans-serif';
  const LABEL_FONT = '10px system-ui, sans-serif';
  const NODE_HEIGHT = 30;
  const LINE_HEIGHT = 12;
  const COMPOUND_TOP = 26;
  const elk = new ELK();
  const measureContext = document.createElement('canvas').getContext('2d');

  function measure(text, font) {
    measureContext.font = font;
    return Math.ceil(measureContext.measureText(text).width);
  }

  /** Ids of the state nodes a snapshot value is in: `{ assigned: 'running' }` → job.assigned, job.assigned.running. */
  function activeIds(machineId, value, prefix) {
    const base = prefix || machineId;
    if (value === null || value === undefined) return [];
    if (typeof value === 'string') return [`${base}.${value}`];
    return Object.entries(value).flatMap(([key, inner]) => [`${base}.${key}`, ...activeIds(machineId, inner, `${base}.${key}`)]);
  }

  function edgeLabel(edge, withGuards) {
    const event = edge.kind === 'always' ? 'always' : edge.event;
    return withGuards && edge.guard ? `${event} [${edge.guard}]` : event;
  }

  function edgeTitle(edge) {
    const actions = edge.actions.length > 0 ? ` / ${edge.actions.join(', ')}` : '';
    return `${edgeLabel(edge, true)}${actions}`;
  }

  function elkNode(node, childrenOf) {
    const children = (childrenOf.get(node.id) || []).map((child) => elkNode(child, childrenOf));
    if (children.length > 0) {
      return { id: node.id, children, layoutOptions: { 'elk.padding': `[top=${COMPOUND_TOP},left=12,bottom=12,right=12]` } };
    }
    return { id: node.id, width: Math.max(64, measure(node.collapsed ? `${node.key} +` : node.key, FONT) + 26), height: NODE_HEIGHT };
  }

  /** Transitions between the same two states share one drawn edge with one label line each. */
  function mergedEdges(graph, withGuards) {
    const merged = new Map();
    for (const edge of graph.edges) {
      if (edge.kind === 'internal' || edge.source === graph.id) continue;
      const pair = `${edge.source}->${edge.target}`;
      const entry = merged.get(pair) || { id: edge.id, source: edge.source, target: edge.target, kind: edge.kind, lines: [], titles: [] };
      if (edge.kind !== 'always') entry.kind = edge.kind;
      const line = edgeLabel(edge, withGuards);
      if (!entry.lines.includes(line)) entry.lines.push(line);
      entry.titles.push(edgeTitle(edge));
      merged.set(pair, entry);
    }
    return [...merged.values()];
  }

  /** The ELK input: the machine's states nested by parent, every drawn edge at the root. */
  function elkGraph(graph, edges) {
    const childrenOf = new Map();
    for (const node of graph.nodes) {
      if (node.parent === null) continue;
      childrenOf.set(node.parent, [...(childrenOf.get(node.parent) || []), node]);
    }
    const elkEdges = edges.map((edge) => ({
      id: edge.id,
      sources: [edge.source],
      targets: [edge.target],
      labels: [{ text: edge.lines.join('\n'), width: Math.max(...edge.lines.map((line) => measure(line, LABEL_FONT))) + 4, height: LINE_HEIGHT * edge.lines.length }],
    }));
    return {
      id: '__root__',
      layoutOptions: {
        'elk.algorithm': 'layered',
        'elk.direction': 'DOWN',
        'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
        'elk.json.edgeCoords': 'ROOT',
        'elk.json.shapeCoords': 'ROOT',
        'elk.spacing.nodeNode': '24',
        'elk.layered.spacing.nodeNodeBetweenLayers': '32',
        'elk.spacing.edgeLabel': '2',
        'elk.spacing.edgeEdge': '6',
        'elk.spacing.edgeNode': '8',
        'elk.layered.spacing.edgeEdgeBetweenLayers': '6',
        'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
        'elk.layered.compaction.postCompaction.strategy': 'EDGE_LENGTH',
        'elk.padding': '[top=8,left=8,bottom=8,right=8]',
      },
      children: (childrenOf.get(graph.id) || []).map((node) => elkNode(node, childrenOf)),
      edges: elkEdges,
    };
  }

  function flatten(laidOut, out, depth) {
    for (const child of laidOut.children || []) {
      out.push({ box: child, depth });
      flatten(child, out, depth + 1);
    }
    return out;
  }

  function drawNode(layer, node, box) {
    const compound = !node.collapsed && (node.type === 'compound' || node.type === 'parallel');
    const group = el('g', { class: `node ${node.collapsed ? 'collapsed' : node.type}${node.initial ? ' initial' : ''}`, 'data-id': node.id });
    group.appendChild(el('title', {}, node.description ? `${node.id}\n${node.description}` : node.id));
    group.appendChild(el('rect', { x: box.x, y: box.y, width: box.width, height: box.height, rx: compound ? 10 : 8 }));
    if (node.type === 'final') group.appendChild(el('rect', { class: 'inner', x: box.x + 3, y: box.y + 3, width: box.width - 6, height: box.height - 6, rx: 6 }));
    const labelY = compound ? box.y + 17 : box.y + box.height / 2 + 4;
    const labelX = compound ? box.x + 20 : box.x + box.width / 2 + (node.initial ? 4 : 0);
    group.appendChild(el('text', { x: labelX, y: labelY, 'text-anchor': compound ? 'start' : 'middle' }, node.collapsed ? `${node.key} +` : node.key));
    if (node.initial) group.appendChild(el('circle', { class: 'initial-dot', cx: box.x + 9, cy: compound ? box.y + 13 : box.y + box.height / 2, r: 3.5 }));
    layer.appendChild(group);
    return group;
  }

  function drawEdge(layer, edge, laid, markerId) {
    const title = edge.titles.join('\n');
    for (const section of laid.sections || []) {
      const path = el('path', { class: `edge ${edge.kind}`, d: sectionPath(section), 'marker-end': `url(#${markerId})`, 'data-edge': edge.id, 'data-source': edge.source });
      path.appendChild(el('title', {}, title));
      layer.appendChild(path);
    }
    for (const label of laid.labels || []) {
      const text = el('text', { class: `edge-label ${edge.kind}`, 'data-edge': edge.id });
      text.appendChild(el('title', {}, title));
      edge.lines.forEach((line, i) => text.appendChild(el('tspan', { x: label.x + 2, y: label.y + 9 + i * LINE_HEIGHT }, line)));
      layer.appendChild(text);
    }
  }

  function render(container, graph, edges, laidOut) {
    const markerId = `arrow-${graph.id}-${Math.random().toString(36).slice(2, 8)}`;
    const svg = el('svg', { class: 'chart', width: laidOut.width, height: laidOut.height, viewBox: `0 0 ${laidOut.width} ${laidOut.height}`, 'data-machine': graph.id });
    const marker = el('marker', { id: markerId, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    marker.appendChild(el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }));
    const defs = el('defs');
    defs.appendChild(marker);
    svg.appendChild(defs);
    const nodesById = new Map(graph.nodes.map((node) => [node.id, node]));
    const nodeLayer = el('g', { class: 'nodes' });
    const groups = new Map();
    for (const { box } of flatten(laidOut, [], 0)) {
      const node = nodesById.get(box.id);
      if (node) groups.set(box.id, drawNode(nodeLayer, node, box));
    }
    const edgeLayer = el('g', { class: 'edges' });
    const edgesById = new Map(edges.map((edge) => [edge.id, edge]));
    for (const laid of laidOut.edges || []) drawEdge(edgeLayer, edgesById.get(laid.id), laid, markerId);
    svg.append(nodeLayer, edgeLayer);
    container.replaceChildren(svg);
    return { svg, groups };
  }

  /**
   * The chart with only the states whose every ancestor is `opened` (the top-level states when none
   * is): a hidden state's transitions go from and to its shown ancestor, those inside one box vanish.
   * A shown state with hidden children is `collapsed` (drawn with a `+`, opened by a click).
   */
  function collapsedGraph(graph, opened) {
    const byId = new Map(graph.nodes.map((node) => [node.id, node]));
    const shown = (node) => node.parent === null || node.parent === graph.id || (opened.has(node.parent) && shown(byId.get(node.parent)));
    const shownAncestor = (id) => {
      let node = byId.get(id);
      while (node && !shown(node)) node = byId.get(node.parent);
      return node ? node.id : id;
    };
    const hasChildren = new Set(graph.nodes.map((node) => node.parent));
    const nodes = graph.nodes.filter(shown).map((node) => (hasChildren.has(node.id) && !opened.has(node.id) ? { ...node, collapsed: true } : node));
    const edges = graph.edges
      .map((edge) => ({ ...edge, source: shownAncestor(edge.source), target: shownAncestor(edge.target) }))
      .filter((edge) => edge.source !== edge.target || edge.source === graph.id);
    return { ...graph, nodes, edges };
  }

  /**
   * Lays out and draws `graph` into `container`; the handle highlights the states of a snapshot value.
   * `options.opened`: the compound states shown open (the rest collapsed); absent: the full chart.
   * `options.onToggle(id)`: a click on a compound state asks to open or close it.
   */
  async function draw(container, fullGraph, options) {
    const graph = options && options.opened ? collapsedGraph(fullGraph, options.opened) : fullGraph;
    const edges = mergedEdges(graph, Boolean(options && options.guards));
    const laidOut = await elk.layout(elkGraph(graph, edges));
    const { svg, groups } = render(container, graph, edges, laidOut);
    const leafTypes = new Set(['atomic', 'final']);
    const isLeaf = (node) => node && (leafTypes.has(node.type) || node.collapsed);
    if (options && options.opened && options.onToggle) {
      for (const node of graph.nodes) {
        const group = groups.get(node.id);
        if (!group || (!node.collapsed && !options.opened.has(node.id))) continue;
        group.classList.add('toggle');
        group.addEventListener('click', (event) => {
          event.stopPropagation();
          options.onToggle(node.id);
        });
      }
    }
    return {
      svg,
      highlight(value) {
        const active = new Set(activeIds(graph.id, value));
        for (const [id, group] of groups) {
          group.classList.toggle('active', active.has(id));
          group.classList.toggle('current', active.has(id) && isLeaf(graph.nodes.find((n) => n.id === id)));
        }
        // The transitions that can fire from here: those leaving an active state.
        const possible = new Set();
        for (const path of svg.querySelectorAll('path.edge')) {
          const can = active.has(path.getAttribute('data-source'));
          path.classList.toggle('possible', can);
          if (can) possible.add(path.getAttribute('data-edge'));
        }
        for (const label of svg.querySelectorAll('text.edge-label')) label.classList.toggle('possible', possible.has(label.getAttribute('data-edge')));
        svg.setAttribute('data-active', [...active].join(' '));
      },
    };
  }

  window.Switchyard = Object.assign(window.Switchyard || {}, { chart: { draw, activeIds } });
}
