// The overview: every mirror with its partitions per state, lag, rate and
// last sync, and the instances with the leases each holds.

import { get, seg } from '../api.js';
import { h, replace } from '../dom.js';
import { count, rate, time, ago } from '../format.js';
import { stateBadges } from '../badges.js';
import { sparkline, lagTone, TONE_TEXT } from '../charts.js';
import { keepFocus } from '../focus.js';
import { syncCell } from '../sync.js';

export function overviewPage({ session, main, isCurrent }) {
  replace(main, h('p', { class: 'loading', role: 'status' }, 'Loading mirrors…'));
  let first = true;
  return {
    async refresh() {
      let mirrors;
      let instances;
      let history;
      try {
        [mirrors, instances, history] = await Promise.all([
          get('/v1/mirrors'), get('/v1/instances'), get('/v1/history').catch(() => ({ series: [] })),
        ]);
      } catch (err) {
        if (first && isCurrent()) replace(main, h('section', { class: 'empty-state' }, h('h1', {}, 'Mirrors'), h('p', { class: 'error', role: 'alert' }, err.message)));
        throw err;
      }
      if (!isCurrent()) return;
      first = false;
      const lagSeries = new Map(history.series.filter((s) => !s.topic).map((s) => [s.mirror, s.points]));
      keepFocus(main, () => replace(main,
        h('h1', {}, 'Mirrors'),
        mirrorsSection(mirrors.mirrors, lagSeries, session),
        instancesSection(instances.instances)));
    },
  };
}

function mirrorsSection(mirrors, lagSeries, session) {
  if (!mirrors.length) {
    return h('section', { class: 'empty-state', 'aria-label': 'Mirrors' },
      h('p', {}, 'No mirror yet. A mirror copies topics from one source cluster into this destination.'),
      session.canAdmin ? h('a', { class: 'btn primary', href: '#/new' }, 'Create a mirror') : h('p', { class: 'muted' }, `Creating a mirror needs an admin token; yours is ${session.role}.`));
  }
  const totals = mirrors.reduce((t, m) => ({
    partitions: t.partitions + (m.status?.partitions || 0), lag: t.lag + (m.status?.lag || 0),
    failed: t.failed + (m.status?.states?.FAILED || 0),
  }), { partitions: 0, lag: 0, failed: 0 });
  return h('section', { 'aria-labelledby': 'mirrors-h' },
    h('h2', { id: 'mirrors-h', class: 'visually-hidden' }, 'All mirrors'),
    h('p', { class: 'summary' }, `${count(mirrors.length)} mirror(s), ${count(totals.partitions)} partitions, total lag ${count(totals.lag)}`,
      totals.failed ? h('strong', { class: 'error-text' }, ` — ${count(totals.failed)} partition(s) FAILED`) : null),
    h('div', { class: 'table-wrap', role: 'region', 'aria-label': 'Mirrors table', tabindex: '0' },
      h('table', { class: 'data stack' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Mirror'), h('th', { scope: 'col' }, 'Source'), h('th', { scope: 'col', class: 'num' }, 'Topics'),
          h('th', { scope: 'col' }, 'Partitions'), h('th', { scope: 'col', class: 'num' }, 'Lag'), h('th', { scope: 'col' }, 'Lag, 10 min'),
          h('th', { scope: 'col', class: 'num' }, 'Records/s'), h('th', { scope: 'col' }, 'Last sync'))),
        h('tbody', {}, mirrors.map((m) => mirrorRow(m, lagSeries.get(m.name) || []))))),
    h('p', { class: 'hint legend' }, 'Lag lines are green without lag, amber while it grows steadily, red when partitions are FAILED, grey otherwise.'));
}

function mirrorRow(m, points) {
  const st = m.status || {};
  const lags = points.map((p) => p.lag);
  const tone = lagTone(points.map((p) => ({ at: p.at, value: p.lag })), st.states?.FAILED);
  // data-label names each cell where phone width stacks the columns.
  return h('tr', { class: st.states?.FAILED ? 'row-failed' : null },
    h('th', { scope: 'row', 'data-label': 'Mirror' }, h('a', { href: `#/mirrors/${seg(m.name)}`, 'data-focus-key': `mirror-${m.name}` }, m.name)),
    h('td', { class: 'mono wrap', 'data-label': 'Source' }, m.source.bootstrap_servers),
    h('td', { class: 'num', 'data-label': 'Topics' }, count(st.topics)),
    h('td', { 'data-label': 'Partitions' }, stateBadges(st.states)),
    h('td', { class: 'num', 'data-label': 'Lag' }, count(st.lag)),
    h('td', { 'data-label': 'Lag, 10 min' }, sparkline(lags, `Lag of ${m.name} over the last 10 minutes: ${lags.length
      ? `now ${count(lags[lags.length - 1])}, highest ${count(Math.max(...lags))}` : 'no samples yet'}${tone ? `; ${TONE_TEXT[tone]}` : ''}`, { tone })),
    h('td', { class: 'num', 'data-label': 'Records/s' }, rate(st.records_per_sec)),
    h('td', { 'data-label': 'Last sync' }, syncCell(m.last_sync)));
}

function instancesSection(instances) {
  return h('section', { 'aria-labelledby': 'inst-h' },
    h('h2', { id: 'inst-h' }, 'Instances'),
    instances.length === 0
      ? h('p', { class: 'empty-state' }, 'No kmirror instance has registered yet.')
      : h('div', { class: 'table-wrap', role: 'region', 'aria-label': 'Instances table', tabindex: '0' },
        h('table', { class: 'data stack' },
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Instance'), h('th', { scope: 'col' }, 'Host'),
            h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col', class: 'num' }, 'Leases'),
            h('th', { scope: 'col' }, 'Last heartbeat'), h('th', { scope: 'col' }, 'Version'))),
          h('tbody', {}, instances.map((i) => h('tr', {},
            h('th', { scope: 'row', class: 'mono', 'data-label': 'Instance' }, i.id),
            h('td', { 'data-label': 'Host' }, i.hostname || '—'),
            h('td', { 'data-label': 'Status' }, h('span', { class: `badge ${i.live ? 'ok' : 'off'}` }, i.live ? 'live' : (i.stopped_at ? 'stopped' : 'silent'))),
            h('td', { class: 'num', 'data-label': 'Leases' }, count(i.leases ?? 0)),
            // One span, so a stacked card keeps the time and its age together.
            h('td', { 'data-label': 'Last heartbeat' }, h('span', {}, time(i.heartbeat_at), h('span', { class: 'muted' }, ` (${ago(i.heartbeat_at)})`))),
            h('td', { class: 'mono', 'data-label': 'Version' }, i.version || '—')))))));
}
