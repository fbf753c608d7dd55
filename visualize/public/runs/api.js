'use strict';
// The runs page's calls to the coordinator API, with the admin token the visualizer keeps too.
{
  /** The log route answers at most this many chunks per call (its default limit). */
  const LOG_PAGE = 1000;
  /** Runs per list refresh: each row carries the run's whole input summary (its workflow too). */
  const LIST_LIMIT = 100;

  const { takeTokenFromUrl, tokenOf, setToken, call, get, UnauthorizedError, ApiError } = window.SwitchyardCommon;
  const runPath = (id) => `/api/v1/runs/${encodeURIComponent(id)}`;

  /** Every log chunk of the run after chunk `afterId`, in arrival order, across pages. */
  async function logsAfter(runId, afterId) {
    const chunks = [];
    let after = afterId;
    for (;;) {
      const page = (await get(`${runPath(runId)}/logs?after=${after}&limit=${LOG_PAGE}`)).chunks;
      chunks.push(...page);
      if (page.length < LOG_PAGE) return chunks;
      after = page[page.length - 1].id;
    }
  }

  takeTokenFromUrl();
  window.RunsPage = Object.assign(window.RunsPage || {}, {
    api: {
      hasToken: () => Boolean(tokenOf()),
      setToken,
      runs: async (status) => (await get(`/api/v1/runs?limit=${LIST_LIMIT}${status ? `&status=${encodeURIComponent(status)}` : ''}`)).runs,
      run: (id) => get(runPath(id)),
      logsAfter,
      cancel: (id) => call('POST', `${runPath(id)}/cancel`, {}),
      rerun: (id, failedOnly = false) => call('POST', `${runPath(id)}/rerun`, failedOnly ? { failedOnly: true } : {}),
    },
    UnauthorizedError,
    ApiError,
  });
}
