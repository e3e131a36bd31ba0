// Hand-drawn SVG charts: a line chart over the recent minutes and a
// sparkline. Each carries a text summary for screen readers.
//
// A lag line is coloured by what the lag is doing (lagTone), so that only
// lag worth a look is drawn in a warning colour: green when there is none,
// amber while it grows steadily (for about a minute or more), red when
// partitions are FAILED, neutral otherwise. The words for the colour are in
// the chart's text too.

import { svg } from './dom.js';
import { count } from './format.js';

/**
 * lineChart draws one series: points are {at, value}. It spans the given
 * window (seconds) ending now, so charts of different topics line up.
 */
export function lineChart({ points, label, format = count, windowSec = 600, width = 360, height = 120, cls = 'lag', tone = null }) {
  const pad = { l: 48, r: 8, t: 10, b: 20 };
  const now = Date.now();
  // The span grows with the samples (at least a minute) up to the window,
  // so a fresh history is not squeezed against the right edge.
  const first = points.length ? new Date(points[0].at).getTime() : now;
  const t0 = Math.max(now - windowSec * 1000, Math.min(first, now - 60_000));
  const span = spanText((now - t0) / 1000);
  const vals = points.map((p) => p.value);
  const maxV = Math.max(1, ...vals);
  const x = (t) => pad.l + ((t - t0) / (now - t0)) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / maxV) * (height - pad.t - pad.b);
  const last = vals.length ? vals[vals.length - 1] : null;
  const summary = vals.length
    ? `${label} over the last ${span}: now ${format(last)}, highest ${format(Math.max(...vals))}${tone ? `; ${TONE_TEXT[tone]}` : ''}`
    : `${label}: no samples yet`;
  const el = svg('svg', { viewBox: `0 0 ${width} ${height}`, class: `chart ${cls}${tone ? ` tone-${tone}` : ''}`, role: 'img', 'aria-label': summary },
    svg('title', {}, summary),
    // Axes and the top gridline, with the scale's top value.
    svg('line', { x1: pad.l, y1: height - pad.b, x2: width - pad.r, y2: height - pad.b, class: 'axis' }),
    svg('line', { x1: pad.l, y1: pad.t, x2: width - pad.r, y2: pad.t, class: 'grid' }),
    svg('text', { x: pad.l - 4, y: pad.t + 4, class: 'tick', 'text-anchor': 'end' }, format(maxV)),
    svg('text', { x: pad.l - 4, y: height - pad.b, class: 'tick', 'text-anchor': 'end' }, '0'),
    svg('text', { x: pad.l, y: height - 4, class: 'tick' }, `−${span}`),
    svg('text', { x: width - pad.r, y: height - 4, class: 'tick', 'text-anchor': 'end' }, 'now'));
  if (points.length) {
    const d = points.map((p, i) => `${i ? 'L' : 'M'}${x(new Date(p.at).getTime()).toFixed(1)},${y(p.value).toFixed(1)}`).join('');
    el.append(svg('path', { d, class: 'line' }));
    const lp = points[points.length - 1];
    el.append(svg('circle', { cx: x(new Date(lp.at).getTime()), cy: y(lp.value), r: 3, class: 'dot' }));
  } else {
    el.append(svg('text', { x: width / 2, y: height / 2, class: 'empty', 'text-anchor': 'middle' }, 'Waiting for samples…'));
  }
  return el;
}

/**
 * sparkline draws values as a small line; the label is its text, and tone
 * (lagTone's) its colour.
 */
export function sparkline(values, label, { width = 96, height = 24, tone = null } = {}) {
  const maxV = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / maxV) * (height - 4)).toFixed(1)}`);
  return svg('svg', { viewBox: `0 0 ${width} ${height}`, class: `spark${tone ? ` tone-${tone}` : ''}`, role: 'img', 'aria-label': label, width, height },
    svg('title', {}, label),
    values.length > 1 ? svg('polyline', { points: pts.join(' '), class: 'line' }) : svg('line', { x1: 0, y1: height - 2, x2: width, y2: height - 2, class: 'axis' }));
}

/** TONE_TEXT says in words what each lagTone's colour says. */
export const TONE_TEXT = {
  none: 'no lag',
  steady: 'lag, not growing steadily',
  growing: 'growing steadily',
  failing: 'partitions FAILED',
};

// The lag's trend is read from the last two minutes of samples, split in an
// older and a newer half by time (halves of what there is while the history
// is shorter).
const TREND_SEC = 120;

/**
 * lagTone names the colour of a lag line from its samples ({at, value}) and
 * how many of its partitions are FAILED:
 *  - failing: some partition is FAILED (red, the alarm);
 *  - growing: of the last two minutes, the newer half's lowest sample is
 *    above the older half's lowest, and its average above the older half's
 *    by more than half the older half's swing (highest − lowest) (amber).
 *    A steady feed's lag rises and falls between samples by a swing of its
 *    own; only a rise beyond that swing, with the floor rising too, is
 *    growth, so a line turns amber once a rise has lasted about a minute;
 *  - none: the newest sample is 0 (green);
 *  - steady: anything else, lag that holds, falls or has only just risen
 *    (neutral grey);
 * and null while there is no sample and nothing FAILED.
 */
export function lagTone(points, failed = 0) {
  if (failed > 0) return 'failing';
  if (!points.length) return null;
  const t = (p) => new Date(p.at).getTime();
  const end = t(points[points.length - 1]);
  const recent = points.filter((p) => t(p) >= end - TREND_SEC * 1000);
  const mid = (t(recent[0]) + end) / 2;
  const older = recent.filter((p) => t(p) < mid).map((p) => p.value);
  const newer = recent.filter((p) => t(p) >= mid).map((p) => p.value);
  if (older.length >= 2 && newer.length >= 2) {
    const mean = (vs) => vs.reduce((a, b) => a + b, 0) / vs.length;
    const swing = Math.max(...older) - Math.min(...older);
    if (Math.min(...newer) > Math.min(...older) && mean(newer) - mean(older) > swing / 2) return 'growing';
  }
  return points[points.length - 1].value === 0 ? 'none' : 'steady';
}

function spanText(sec) {
  return sec >= 90 ? `${Math.round(sec / 60)} min` : `${Math.round(sec)} s`;
}
