'use strict';
// A run's step logs as they arrive: each chunk's lines are appended under its job and step.
{
  const { api } = window.RunsPage;
  const { h } = window.RunsPage.dom;
  const { stepBlock } = window.RunsPage.run;

  /**
   * Follows one run's logs from chunk 0. `poll()` reads the chunks after the last one seen;
   * `jobStatus(jobKey)` decides whether a new step block starts open; nothing is appended once
   * `isCurrent()` is false (the page has moved on to another view).
   */
  function followLogs(runId, jobStatus, isCurrent) {
    let lastId = 0;

    function append(chunk) {
      const block = stepBlock(chunk.jobKey, chunk.stepIndex, chunk.stepName, jobStatus(chunk.jobKey));
      const log = block.querySelector('pre.log');
      const previous = block.dataset.dispatch;
      if (previous !== undefined && previous !== chunk.dispatchId) log.append(h('span', { class: 'attempt-marker' }, '── next attempt ──\n'));
      block.dataset.dispatch = chunk.dispatchId;
      const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.append(chunk.lines.map((line) => `${line}\n`).join(''));
      if (atBottom) log.scrollTop = log.scrollHeight;
      block.dataset.lines = String(Number(block.dataset.lines || 0) + chunk.lines.length);
    }

    async function poll() {
      const chunks = await api.logsAfter(runId, lastId);
      if (!isCurrent()) return 0;
      for (const chunk of chunks) {
        if (chunk.id <= lastId) continue;
        append(chunk);
        lastId = chunk.id;
      }
      return chunks.length;
    }

    return { poll };
  }

  window.RunsPage = Object.assign(window.RunsPage || {}, { logs: { followLogs } });
}
