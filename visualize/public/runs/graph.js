'use strict';
// The run's needs graph: each job a box coloured by its status, an arrow from each job to the jobs
// that need it, laid out left to right by ELK; a box links to its job's section below.
{
  const { s: svg, sectionPath } = window.SwitchyardCommon;
  const FONT = '13px system-ui, sans-serif';
  const BOX_HEIGHT = 34;
  const elk = new ELK();
  const measureContext = document.createElement('canvas').getContext('2d');
  /** The shape last laid out (jobs and needs), so a status change recolours without a new layout. */
  const drawn = { shape: '', boxes: new Map() };

  function boxWidth(text) {
    measureContext.font = FONT;
    return Math.max(90, Math.ceil(measureContext.measureText(text).width) + 36);
  }

  const shapeOf = (jobs) => JSON.stringify(jobs.map((job) => [job.job_key, job.needs || []]));

  async function layout(jobs) {
    const keys = new Set(jobs.map((job) => job.job_key));
    const edges = jobs.flatMap((job) => (job.needs || []).filter((need) => keys.has(need)).map((need) => ({ id: `${need}->${job.job_key}`, sources: [need], targets: [job.job_key] })));
    return elk.layout({
      id: 'needs',
      layoutOptions: { 'elk.algorithm': 'layered', 'elk.direction': 'RIGHT', 'elk.spacing.nodeNode': '14', 'elk.layered.spacing.nodeNodeBetweenLayers': '36', 'elk.padding': '[top=6,left=6,bottom=6,right=6]' },
      children: jobs.map((job) => ({ id: job.job_key, width: boxWidth(job.job_key), height: BOX_HEIGHT })),
      edges,
    });
  }

  const edgePath = (edge) => (edge.sections || []).map(sectionPath).join(' ');

  function jobBox(node, links) {
    const rect = svg('rect', { width: node.width, height: node.height, rx: 6 });
    const label = svg('text', { x: node.width / 2, y: node.height / 2 + 4, 'text-anchor': 'middle' }, node.id);
    const title = svg('title', {}, node.id);
    const box = svg('a', { href: links.href(node.id), class: 'graph-job', 'data-job': node.id, transform: `translate(${node.x},${node.y})` }, title, rect, label);
    box.addEventListener('click', (event) => {
      event.preventDefault();
      links.open(node.id);
    });
    return box;
  }

  function recolour(jobs) {
    for (const job of jobs) {
      const box = drawn.boxes.get(job.job_key);
      if (!box) continue;
      box.setAttribute('data-status', job.status);
      box.querySelector('title').textContent = `${job.job_key}: ${job.status.replace('_', ' ')}`;
    }
  }

  /** Draws (or recolours) the graph in `container`; a run of one job has no graph to show. `links`: each box's `href` and what a click `open`s. */
  async function renderNeedsGraph(container, jobs, links) {
    container.hidden = jobs.length < 2;
    if (jobs.length < 2) return;
    const shape = shapeOf(jobs);
    if (shape !== drawn.shape) {
      const graph = await layout(jobs);
      const arrow = svg('marker', { id: 'needs-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, svg('path', { d: 'M0,0 L10,5 L0,10 z' }));
      const edges = (graph.edges || []).map((edge) => svg('path', { d: edgePath(edge), class: 'graph-need', 'marker-end': 'url(#needs-arrow)' }));
      const boxes = (graph.children || []).map((node) => jobBox(node, links));
      const picture = svg('svg', { width: Math.ceil(graph.width), height: Math.ceil(graph.height), role: 'img', 'aria-label': 'the jobs of this run and what each needs' }, svg('defs', {}, arrow), ...edges, ...boxes);
      container.replaceChildren(picture);
      drawn.shape = shape;
      drawn.boxes = new Map(boxes.map((box) => [box.dataset.job, box]));
    }
    recolour(jobs);
  }

  /** A new run view draws its own graph. */
  function forgetNeedsGraph(container) {
    drawn.shape = '';
    drawn.boxes = new Map();
    container.replaceChildren();
  }

  window.RunsPage = Object.assign(window.RunsPage || {}, { graph: { renderNeedsGraph, forgetNeedsGraph } });
}
