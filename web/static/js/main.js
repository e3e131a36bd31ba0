// The console's entry point: who the user is, which page the URL fragment
// names, and live updates that re-render the page without a reload.

import { get, token, ApiError } from './api.js';
import { h, replace } from './dom.js';
import { Live } from './live.js';
import { overviewPage } from './views/overview.js';
import { mirrorPage } from './views/mirror.js';
import { newMirrorPage } from './views/new_mirror.js';
import { tokenPage } from './views/token.js';

const main = document.getElementById('main');
const liveEl = document.getElementById('live');

/**
 * session is what every page may read: the token's name and role, and what
 * the role allows. The server decides (403 otherwise); the console only
 * shows what the role may do: an operator acts on topics and syncs, an
 * admin also creates, edits and deletes mirrors.
 */
const session = {
  authEnabled: false, name: '', role: 'viewer',
  get canOperate() { return this.role === 'operator' || this.role === 'admin'; },
  get canAdmin() { return this.role === 'admin'; },
};

let page = null; // {refresh(change), wants(event), destroy()}
let live = null;
let refreshing = null;
let pending = null; // the change that arrived during a refresh

/**
 * A change says what a refresh should read again: poll when lag and rates
 * may have moved (a poll tick, a page's first read), and topics, the
 * topics the events were about (null: anything may have changed).
 */
const EVERYTHING = { poll: true, topics: null };

// Events come in bursts: pausing a topic changes the state of each of its
// partitions, twice. A page is refreshed once the events have paused for
// EVENT_QUIET_MS, and at the latest EVENT_MAX_WAIT_MS after the first event
// it has not shown yet: a burst costs a refresh or two, not one per event.
const EVENT_QUIET_MS = 250;
const EVENT_MAX_WAIT_MS = 1000;
let burst = null; // {change, first, timer}

function onEvent(ev) {
  if (page?.wants && !page.wants(ev)) return;
  burst ??= { change: { poll: false, topics: new Set() }, first: Date.now() };
  burst.change = merge(burst.change, { poll: false, topics: ev.topic ? new Set([ev.topic]) : null });
  clearTimeout(burst.timer);
  burst.timer = setTimeout(() => {
    const { change } = burst;
    burst = null;
    refresh(change);
  }, Math.max(0, Math.min(EVENT_QUIET_MS, burst.first + EVENT_MAX_WAIT_MS - Date.now())));
}

function merge(a, b) {
  if (!a) return b;
  return { poll: a.poll || b.poll, topics: a.topics && b.topics ? new Set([...a.topics, ...b.topics]) : null };
}

function route() {
  const path = location.hash.replace(/^#/, '') || '/';
  const m = path.match(/^\/mirrors\/([^/]+)$/);
  if (m) return { name: 'mirror', mirror: decodeURIComponent(m[1]) };
  if (path === '/new') return { name: 'new' };
  return { name: 'overview' };
}

function markNav(name) {
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  for (const el of document.querySelectorAll('[data-needs-admin]')) el.hidden = !session.canAdmin;
}

async function show() {
  page?.destroy?.();
  page = null;
  const r = route();
  markNav(r.name);
  // A page's refresh may still be in flight when the route changes: it
  // must not draw over its successor, so each page can ask if it is current.
  let self = null;
  const ctx = { session, main, isCurrent: () => page === self };
  if (r.name === 'mirror') self = mirrorPage(ctx, r.mirror);
  else if (r.name === 'new') self = newMirrorPage(ctx);
  else self = overviewPage(ctx);
  page = self;
  await refresh(EVERYTHING);
  main.focus({ preventScroll: true });
}

/** refresh re-renders the page; changes that arrive meanwhile fold into one. */
async function refresh(change) {
  if (refreshing) {
    pending = merge(pending, change);
    return refreshing;
  }
  refreshing = (async () => {
    try {
      await page?.refresh(change);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) console.warn('refresh failed', err);
    }
  })();
  await refreshing;
  refreshing = null;
  if (pending) {
    const next = pending;
    pending = null;
    return refresh(next);
  }
  return undefined;
}

function setLive(ok, why) {
  liveEl.textContent = ok ? 'Live' : 'Reconnecting… (polling)';
  liveEl.title = ok ? 'Updates stream from /v1/events' : `The event stream is down (${why || 'no answer'}); the page polls every 2 s.`;
  liveEl.dataset.state = ok ? 'live' : 'down';
}

function showIdentity() {
  const slot = document.getElementById('who');
  if (!slot) return;
  if (!session.authEnabled) {
    replace(slot);
    return;
  }
  replace(slot, h('span', { class: 'role' }, `Signed in: ${session.name} (${session.role})`), ' ',
    h('button', { type: 'button', class: 'btn link', onclick: signOut }, 'Sign out'));
}

function signOut() {
  token.clear();
  askToken();
}

function askToken(message) {
  live?.stop();
  live = null;
  page?.destroy?.();
  page = null;
  markNav('');
  liveEl.textContent = '';
  tokenPage(main, message, start);
}

async function start() {
  try {
    const who = await get('/v1/whoami');
    session.authEnabled = who.auth_enabled;
    session.role = who.role;
    session.name = who.name;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      askToken(token.get() ? 'That token was not accepted. Enter a valid token.' : undefined);
      return;
    }
    replace(main, h('section', { class: 'empty-state' }, h('h1', {}, 'kmirror is not answering'),
      h('p', {}, err.message), h('button', { type: 'button', class: 'btn primary', onclick: start }, 'Try again')));
    return;
  }
  showIdentity();
  live = new Live((ev) => (ev ? onEvent(ev) : refresh(EVERYTHING)), setLive);
  live.start();
  await show();
}

window.addEventListener('hashchange', show);
window.addEventListener('kmirror:unauthorized', () => {
  if (live) askToken(session.authEnabled ? 'Your token is no longer accepted. Enter a valid token.' : undefined);
});
start();
