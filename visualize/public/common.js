'use strict';
// What the visualizer and the runs page share: the admin token, calls to the coordinator API, and
// the DOM builder. Loaded first by both pages (served to each as common.js).
{
  const TOKEN_KEY = 'switchyard.adminToken';

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
  const setToken = (token) => sessionStorage.setItem(TOKEN_KEY, token.trim());

  /** One API call; resolves with the status and the JSON body of a 2xx answer. A refused token is forgotten. */
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

  /** `h('a', { href, onclick }, child…)`: an element with its attributes, listeners and children. */
  function h(tag, attributes, ...children) {
    return filled(document.createElement(tag), attributes, children);
  }

  /** `s('rect', { width }, child…)`: the same for an SVG element. */
  function s(tag, attributes, ...children) {
    return filled(document.createElementNS('http://www.w3.org/2000/svg', tag), attributes, children);
  }

  /** An edge section ELK laid out, as an SVG path: its start, its bends, its end. */
  function sectionPath(section) {
    const points = [section.startPoint, ...(section.bendPoints || []), section.endPoint];
    return points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' ');
  }

  function filled(element, attributes, children) {
    for (const [key, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith('on')) element.addEventListener(key.slice(2), value);
      else element.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) element.append(child instanceof Node ? child : String(child));
    }
    return element;
  }

  window.SwitchyardCommon = { takeTokenFromUrl, tokenOf, setToken, call, get, h, s, sectionPath, UnauthorizedError, ApiError };
}
