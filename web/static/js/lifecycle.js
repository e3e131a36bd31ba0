// The partition lifecycle: every state, the transitions between them, and
// how many partitions are in each state now. It is drawn twice from the
// same table: as a diagram, and as a list of states, each with the ways out
// of it. The stylesheet shows the list where the diagram would be drawn
// smaller than its own size (its labels would be too small to read), so
// at phone width.

import { h, svg } from './dom.js';

export const STATES = ['PREPARING', 'MIRRORING', 'PAUSING', 'PAUSED', 'STOPPING', 'STOPPED', 'FAILED'];

// The diagram's grid, in its own units (CSS pixels at natural size): two
// rows of boxes, room above them for the resume arc and its label, and
// room on the left and below for the restart route.
const W = 124;
const H = 48;
const COL = [30, 218, 406, 594];
const ROW = [56, 176];
const WIDTH = COL[3] + W + 12;
const HEIGHT = ROW[1] + H + 52;
const BOX = {
  PREPARING: [COL[0], ROW[0]], MIRRORING: [COL[1], ROW[0]], PAUSING: [COL[2], ROW[0]], PAUSED: [COL[3], ROW[0]],
  FAILED: [COL[0], ROW[1]], STOPPING: [COL[2], ROW[1]], STOPPED: [COL[3], ROW[1]],
};

// Each transition: from, to, what causes it (empty: the state's work ends),
// whether it is a way back (drawn dashed), and the path it is drawn along
// with where its label sits ([x, y, text-anchor]). A label sits beside its
// arrow, never across another.
const [PX, PY] = BOX.PREPARING;
const [MX, MY] = BOX.MIRRORING;
const [SX, SY] = BOX.STOPPING;
const [DX, DY] = BOX.STOPPED;
const [QX, QY] = BOX.PAUSED;
const mid = (a, b) => (a + b) / 2;
const RIGHT = (from, to) => {
  const [fx, fy] = BOX[from];
  const [tx] = BOX[to];
  return { d: `M${fx + W},${fy + H / 2}H${tx - 1}`, at: [mid(fx + W, tx), fy + H / 2 - 7, 'middle'] };
};
const TRANSITIONS = [
  { from: 'PREPARING', to: 'MIRRORING', cause: 'aligned', ...RIGHT('PREPARING', 'MIRRORING') },
  { from: 'PREPARING', to: 'FAILED', cause: 'error', d: `M${PX + 40},${PY + H}V${BOX.FAILED[1] - 1}`, at: [PX + 34, mid(PY + H, BOX.FAILED[1]) + 4, 'end'] },
  { from: 'MIRRORING', to: 'PAUSING', cause: 'pause', ...RIGHT('MIRRORING', 'PAUSING') },
  { from: 'MIRRORING', to: 'STOPPING', cause: 'remove', d: `M${MX + 93},${MY + H}L${SX + 31},${SY - 1}`, at: [mid(MX + 93, SX + 31) + 10, mid(MY + H, SY) - 8, 'start'] },
  { from: 'PAUSING', to: 'PAUSED', cause: '', ...RIGHT('PAUSING', 'PAUSED') },
  { from: 'PAUSED', to: 'MIRRORING', cause: 'resume', back: true, d: `M${QX + W / 2},${QY}C${QX + W / 2},${QY - 36} ${MX + W / 2},${QY - 36} ${MX + W / 2},${MY - 1}`, at: [mid(QX, MX) + W / 2, QY - 35, 'middle'] },
  { from: 'PAUSED', to: 'STOPPED', cause: 'remove', d: `M${QX + W / 2},${QY + H}V${DY - 1}`, at: [QX + W / 2 + 6, mid(QY + H, DY) + 4, 'start'] },
  { from: 'STOPPING', to: 'STOPPED', cause: '', ...RIGHT('STOPPING', 'STOPPED') },
  { from: 'STOPPED', to: 'PREPARING', cause: 'restart (add again)', back: true,
    d: `M${DX + W / 2},${DY + H}V${HEIGHT - 34}Q${DX + W / 2},${HEIGHT - 26} ${DX + W / 2 - 8},${HEIGHT - 26}H18Q10,${HEIGHT - 26} 10,${HEIGHT - 34}V${PY + H / 2 + 8}Q10,${PY + H / 2} 18,${PY + H / 2}H${PX - 1}`,
    at: [mid(SX, MX + W), HEIGHT - 8, 'middle'] },
  { from: 'FAILED', to: 'PREPARING', cause: 'retry', back: true, d: `M${PX + 84},${BOX.FAILED[1]}V${PY + H + 1}`, at: [PX + 90, mid(PY + H, BOX.FAILED[1]) + 4, 'start'] },
];

/** lifecycle shows the lifecycle with counts: {MIRRORING: 3, ...}. */
export function lifecycle(counts) {
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const where = (s) => (counts[s] ? `${counts[s]} of ${total}` : '0');
  return h('div', { class: 'lifecycle-wrap' }, diagram(counts, where), list(counts, where));
}

function diagram(counts, where) {
  const label = `Partition lifecycle. ${STATES.map((s) => `${s}: ${counts[s] || 0}`).join(', ')}.`;
  const el = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'lifecycle', role: 'img', 'aria-label': label },
    svg('title', {}, label),
    svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      svg('path', { d: 'M0,0L10,5L0,10z', class: 'arrowhead' }))));
  for (const t of TRANSITIONS) {
    const [x, y, anchor] = t.at;
    el.append(svg('g', { class: 'transition', 'data-from': t.from, 'data-to': t.to },
      svg('path', { d: t.d, class: `edge${t.back ? ' back' : ''}`, 'marker-end': 'url(#arrow)' }),
      t.cause ? svg('text', { x, y, class: 'edge-label', 'text-anchor': anchor }, t.cause) : null));
  }
  for (const s of STATES) {
    const [x, y] = BOX[s];
    el.append(svg('g', { class: `node st-${s}${counts[s] ? ' occupied' : ''}` },
      svg('rect', { x, y, width: W, height: H, rx: 6 }),
      svg('text', { x: x + W / 2, y: y + 20, 'text-anchor': 'middle', class: 'node-name' }, s),
      svg('text', { x: x + W / 2, y: y + 38, 'text-anchor': 'middle', class: 'node-count' }, where(s))));
  }
  return el;
}

// list is the same as text: a row per state, its count, and its
// transitions out ("pause → PAUSING"). A transition with no cause happens
// once the state's work is done.
function list(counts, where) {
  return h('ol', { class: 'lifecycle-list', 'aria-label': 'Partition lifecycle' }, STATES.map((s) => {
    const out = TRANSITIONS.filter((t) => t.from === s);
    // An occupied state's box is tinted as its badge is (.st-*).
    return h('li', { 'data-state': s },
      h('span', { class: `node${counts[s] ? ` occupied st-${s}` : ''}` }, h('span', { class: 'node-name' }, s), h('span', { class: 'node-count' }, where(s))),
      h('ul', { class: 'moves', 'aria-label': `From ${s}` }, out.map((t) => h('li', {},
        t.cause || h('span', { class: 'muted' }, 'when done'),
        h('span', { 'aria-hidden': 'true' }, ' → '), h('span', { class: 'visually-hidden' }, ' to '),
        h('span', { class: 'to' }, t.to)))));
  }));
}
