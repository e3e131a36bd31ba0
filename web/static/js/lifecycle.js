// The partition lifecycle as a picture: every state, the transitions
// between them, and how many partitions are in each state now.

import { svg } from './dom.js';

export const STATES = ['PREPARING', 'MIRRORING', 'PAUSING', 'PAUSED', 'STOPPING', 'STOPPED', 'FAILED'];

const W = 118;
const H = 44;
const BOX = {
  PREPARING: [10, 20], MIRRORING: [170, 20], PAUSING: [330, 20], PAUSED: [490, 20],
  FAILED: [10, 120], STOPPING: [330, 120], STOPPED: [490, 120],
};
// Each edge: from, to, label; drawn as a straight arrow between box sides.
const EDGES = [
  ['PREPARING', 'MIRRORING', 'aligned'],
  ['MIRRORING', 'PAUSING', 'pause'],
  ['PAUSING', 'PAUSED', ''],
  ['MIRRORING', 'STOPPING', 'remove'],
  ['PAUSED', 'STOPPED', ''],
  ['STOPPING', 'STOPPED', ''],
  ['PREPARING', 'FAILED', 'error'],
];

function anchor(from, to) {
  const [fx, fy] = BOX[from];
  const [tx, ty] = BOX[to];
  if (fy === ty) return [fx + W, fy + H / 2, tx, ty + H / 2];
  if (fx === tx) return [fx + W / 2, fy + H, tx + W / 2, ty];
  return [fx + W * 0.75, fy + H, tx + W * 0.25, ty];
}

/** lifecycle draws the diagram with counts: {MIRRORING: 3, ...}. */
export function lifecycle(counts) {
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const label = `Partition lifecycle. ${STATES.map((s) => `${s}: ${counts[s] || 0}`).join(', ')}.`;
  const el = svg('svg', { viewBox: '0 0 620 190', class: 'lifecycle', role: 'img', 'aria-label': label },
    svg('title', {}, label),
    svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      svg('path', { d: 'M0,0L10,5L0,10z', class: 'arrowhead' }))));
  for (const [from, to, text] of EDGES) {
    const [x1, y1, x2, y2] = anchor(from, to);
    el.append(svg('line', { x1, y1, x2, y2, class: 'edge', 'marker-end': 'url(#arrow)' }));
    if (text) el.append(svg('text', { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 5, class: 'edge-label', 'text-anchor': 'middle' }, text));
  }
  // The ways back: resume, restart (add again), retry after a failure.
  el.append(svg('path', { d: `M${BOX.PAUSED[0] + W / 2},20 C${BOX.PAUSED[0] + W / 2},2 ${BOX.MIRRORING[0] + W / 2},2 ${BOX.MIRRORING[0] + W / 2},18`, class: 'edge back', 'marker-end': 'url(#arrow)' }));
  el.append(svg('text', { x: 420, y: 12, class: 'edge-label', 'text-anchor': 'middle', dy: '-3' }, 'resume'));
  el.append(svg('path', { d: `M${BOX.STOPPED[0] + W / 2},164 C${BOX.STOPPED[0] + W / 2},188 ${BOX.PREPARING[0] + W / 2 + 20},188 ${BOX.PREPARING[0] + W / 2 + 20},66`, class: 'edge back', 'marker-end': 'url(#arrow)' }));
  el.append(svg('text', { x: 250, y: 184, class: 'edge-label', 'text-anchor': 'middle' }, 'restart (add again)'));
  for (const s of STATES) {
    const [x, y] = BOX[s];
    const n = counts[s] || 0;
    const g = svg('g', { class: `node st-${s}${n ? ' occupied' : ''}` },
      svg('rect', { x, y, width: W, height: H, rx: 6 }),
      svg('text', { x: x + W / 2, y: y + 18, 'text-anchor': 'middle', class: 'node-name' }, s),
      svg('text', { x: x + W / 2, y: y + 36, 'text-anchor': 'middle', class: 'node-count' },
        n ? `${n} of ${total}` : '0'));
    el.append(g);
  }
  return el;
}
