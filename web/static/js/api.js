// The console's only way to the server: the public /v1 API, with the
// browser session's bearer token. Errors arrive as problem+json and are
// thrown as ApiError with words a person can read.

const TOKEN_KEY = 'kmirror.token';

/** The bearer token lives in sessionStorage: gone when the tab closes. */
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || '',
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** ApiError is a failed call: its status and the problem body. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(describe(status, problem));
    this.status = status;
    this.problem = problem || {};
  }
}

// describe turns a problem into one plain sentence, with the field errors.
function describe(status, p) {
  if (!p || typeof p !== 'object') return `The server answered ${status}.`;
  let msg = p.detail || p.title || `The server answered ${status}.`;
  if (Array.isArray(p.errors) && p.errors.length) {
    msg = p.errors.map((e) => `${e.field}: ${e.message}`).join('; ');
  }
  if (Array.isArray(p.topics) && p.topics.length && !msg.includes(p.topics[0].topic)) {
    msg += ` (${p.topics.map(conflictText).join(', ')})`;
  }
  return msg;
}

// conflictText says why one topic of a 409 conflicts: its state, or the
// mirror that writes its destination topic, named where it is another
// (topic.name.prefix).
function conflictText(t) {
  if (!t.mirrored_by) return `${t.topic} is ${t.desired_state}`;
  if (t.destination_topic && t.destination_topic !== t.topic) {
    return `destination topic ${t.destination_topic} (for ${t.topic}) is written by mirror ${t.mirrored_by}`;
  }
  return `${t.topic} is mirrored by ${t.mirrored_by}`;
}

export function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const t = token.get();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/**
 * call sends one request. query is an object of query parameters; body is
 * sent as JSON. A 401 also fires "kmirror:unauthorized" on window, which
 * takes the user back to the token prompt.
 */
export async function call(method, path, { query, body, signal } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, String(v));
  }
  let res;
  try {
    res = await fetch(url, {
      method,
      signal,
      headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, { detail: 'The kmirror server cannot be reached.' });
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text.slice(0, 300) };
  }
  if (!res.ok) {
    if (res.status === 401) window.dispatchEvent(new CustomEvent('kmirror:unauthorized'));
    throw new ApiError(res.status, data);
  }
  return data;
}

export const get = (path, query, signal) => call('GET', path, { query, signal });
export const post = (path, body, query) => call('POST', path, { body, query });

/** m encodes a path segment. */
export const seg = encodeURIComponent;
