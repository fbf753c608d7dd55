'use strict';
// Where the page's data comes from: the coordinator's API and /ws/observe, or an offline copy.
{
  const { takeTokenFromUrl, tokenOf, setToken, get, UnauthorizedError } = window.SwitchyardCommon;
  const MAX_RETRY_MS = 10_000;

  /** Live frames of every run; reconnects with backoff. Returns a function that stops watching. */
  function watch(onFrame, onState) {
    let socket = null;
    let stopped = false;
    let retryMs = 500;
    const connect = () => {
      const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
      socket = new WebSocket(`${scheme}://${location.host}/ws/observe?token=${encodeURIComponent(tokenOf() || '')}`);
      socket.addEventListener('open', () => {
        retryMs = 500;
        onState('live');
      });
      socket.addEventListener('message', (message) => onFrame(JSON.parse(message.data)));
      socket.addEventListener('close', () => {
        if (stopped) return;
        onState('reconnecting');
        setTimeout(connect, retryMs);
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
      });
    };
    connect();
    return () => {
      stopped = true;
      if (socket) socket.close();
    };
  }

  function liveSource() {
    takeTokenFromUrl();
    const run = (id) => `/api/v1/runs/${encodeURIComponent(id)}`;
    return {
      offline: false,
      hasToken: () => Boolean(tokenOf()),
      setToken,
      machines: async () => (await get('/api/v1/machines')).machines,
      runs: async () => (await get('/api/v1/runs?limit=200')).runs,
      run: (id) => get(run(id)),
      history: async (id) => (await get(`${run(id)}/history`)).events,
      replay: (id) => get(`${run(id)}/replay`),
      watch,
    };
  }

  /** An offline copy (`switchyard visualize --out`): one run, its history and replay, embedded by data.js. */
  function offlineSource(data) {
    return {
      offline: true,
      hasToken: () => true,
      setToken: () => {},
      machines: async () => data.machines,
      runs: async () => [data.run.run],
      run: async () => data.run,
      history: async () => data.history,
      replay: async () => {
        if (!data.replay) throw new Error(data.replayError || 'this copy holds no replay');
        return data.replay;
      },
      watch: (_onFrame, onState) => {
        onState(`offline copy, exported ${new Date(data.exportedAt).toISOString()}`);
        return () => {};
      },
    };
  }

  const offline = window.SWITCHYARD_OFFLINE;
  window.Switchyard = Object.assign(window.Switchyard || {}, {
    source: offline ? offlineSource(offline) : liveSource(),
    UnauthorizedError,
  });
}
