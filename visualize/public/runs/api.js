'use strict';
// The runs page's calls to the coordinator API, with the admin token the visualizer keeps too.
{
  const TOKEN_KEY = 'switchyard.adminToken';
  /** The log route answers at most this many chunks per call (its default limit). */
  const LOG_PAGE = 1000;
  /** Runs per list refresh: each row carries the run's whole input summary (its workflow too). */
  const LIST_LIMIT = 100;

  class UnauthorizedError extends Error {}

  /** A non-2xx answer: its status and the API's reason. */
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** `?token=` is taken once into sessionStorage and removed from the address bar. */
  function takeTokenFromUrl() {
    const url = new URL(location.href);
    const token = url.searchParams.get('token');
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    url.searchParams.delete('token');
    history.replaceState(null, '', `${url.pathname}${url.search}${url.hash}`);
  }

  const tokenOf = () => sessionStorage.getItem(TOKEN_KEY);

  /** One API call; resolves with the status and the JSON body of a 2xx answer. */
  async function call(method, path, body) {
    const token = tokenOf();
    if (!token) throw new UnauthorizedError('an admin token is needed');
    const headers = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    if (response.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      throw new UnauthorizedError('the admin token was refused');
    }
    const answer = await response.json().catch(() => null);
    if (!response.ok) throw new ApiError(response.status, (answer && (answer.reason || answer.error)) || `${response.status} ${response.statusText}`);
    return { status: response.status, body: answer };
  }

  const get = async (path) => (await call('GET', path)).body;
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
      setToken: (token) => sessionStorage.setItem(TOKEN_KEY, token.trim()),
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
