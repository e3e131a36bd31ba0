// State badges: colour and text together, so colour is never the only sign.

import { h } from './dom.js';
import { STATES } from './lifecycle.js';

/** stateBadge shows one state, with a count when given. */
export function stateBadge(state, n) {
  const text = n === undefined ? state : `${state} ${n}`;
  return h('span', { class: `badge st-${state}` }, text);
}

/** stateBadges shows {STATE: n} in lifecycle order, FAILED first. */
export function stateBadges(states) {
  const order = ['FAILED', ...STATES.filter((s) => s !== 'FAILED'), 'UNKNOWN'];
  const list = order.filter((s) => states && states[s] > 0);
  if (!list.length) return h('span', { class: 'muted' }, 'no partitions');
  return h('span', { class: 'badges' }, list.map((s) => stateBadge(s, states[s])));
}

/** desiredBadge shows a topic's desired state in words. */
export function desiredBadge(desired) {
  return h('span', { class: `badge desired-${desired}` }, desired);
}

// CHECK_SIGNS mark a check's status beside its word, for a table scanned
// by eye; screen readers hear the word only.
const CHECK_SIGNS = { pass: '✓', warn: '!', fail: '✕' };

/** checkBadge shows a preflight check's status: pass, warn or fail. */
export function checkBadge(status) {
  return h('span', { class: `badge check-${status}` },
    h('span', { 'aria-hidden': 'true' }, `${CHECK_SIGNS[status] || '?'} `), status);
}

/** okBadge shows a pass's outcome: OK, or failed in the words given. */
export function okBadge(ok, failed = 'failed') {
  return h('span', { class: `badge ${ok ? 'ok' : 'st-FAILED'}` }, ok ? 'OK' : failed);
}

// SCHEMA_MODES say what a destination subject's mode means for its writers.
const SCHEMA_MODES = {
  READONLY: 'Copied from the source: the destination registry refuses other registrations while its topic is mirrored',
  READWRITE: 'Its topic was removed (failed over): applications may register new versions on the destination',
};

/** schemaModeBadge shows a destination subject's mode, READONLY or READWRITE. */
export function schemaModeBadge(mode) {
  return h('span', { class: `badge mode-${mode}`, title: SCHEMA_MODES[mode] || null }, mode);
}
