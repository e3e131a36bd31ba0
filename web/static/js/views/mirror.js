// A mirror's page: its lifecycle picture and charts, what needs attention
// (errors in full, kept divergent tails), the topics, filters and actions,
// the Schema Registry sync, and the offset translator.
//
// Its cost does not grow with the mirror. It reads the server's aggregates:
// the mirror's partitions per state, lag and rate, and each topic's. Of the
// partitions it reads bounded pages only: those with an error or a kept
// tail, and an open topic's, a page at a time. A refresh re-reads what is
// shown, a few small requests; the history (the charts) is read on the
// 5-second polls, not on each event, and per topic only while a topic is
// open. The controls are built once; the data regions are re-rendered on
// every change so typing and focus are never lost.

import { get, seg, ApiError } from '../api.js';
import { h, replace, uid } from '../dom.js';
import { count, rate, seconds, time, ago, regexQuote } from '../format.js';
import { stateBadge, stateBadges, desiredBadge } from '../badges.js';
import { lineChart, lagTone } from '../charts.js';
import { lifecycle, STATES } from '../lifecycle.js';
import { keepFocus } from '../focus.js';
import { syncCell, SYNC_KINDS, failedKinds } from '../sync.js';
import { PartitionPages, moreButton } from '../partition_pages.js';
import { errorsView, tailsView } from './attention.js';
import { addTopicsDialog, pauseDialog, resumeDialog, removeDialog, restartDialog } from './topic_actions.js';
import { syncDialog, configDialog, deleteDialog, translateForm } from './mirror_actions.js';
import { checkDialog } from './check.js';
import { schemasView } from './schemas.js';
import { tailText } from './continuation.js';
import { destinationOf, topicNames, topicNamesNode } from '../topic_names.js';

// ATTENTION_PAGE is how many partitions with an error, or with a kept
// tail, are read at a time.
const ATTENTION_PAGE = 50;
// TOPIC_PAGE is how many partitions of an open topic are read at a time.
const TOPIC_PAGE = 100;

const NO_HISTORY = { series: [], window_seconds: 600 };

// TOPIC_NAME_PREFIX is the mirror config that names its destination topics.
const TOPIC_NAME_PREFIX = 'topic.name.prefix';

export function mirrorPage({ session, main, isCurrent }, name) {
  const view = {
    name, stateFilter: '', textFilter: '', data: null,
    // open holds the PartitionPages of each open topic, by name.
    open: new Map(),
    errors: new PartitionPages({ mirror: name, erroring: true }, { pageSize: ATTENTION_PAGE }),
    tails: new PartitionPages({ mirror: name, divergent_tail: true }, { pageSize: ATTENTION_PAGE }),
    history: NO_HISTORY,
    // historyPerTopic: view.history has a series per topic, not only the
    // mirror's total.
    historyPerTopic: false,
  };
  const regions = {
    head: h('div', { class: 'mirror-head' }, h('p', { class: 'loading', role: 'status' }, `Loading mirror ${name}…`)),
    attention: h('div'),
    pictures: h('div', { class: 'pictures' }),
    topics: h('div'),
    // The Schema Registry sync, for a mirror that names a source registry.
    schemas: h('div'),
    translate: h('div'),
  };
  const rerender = () => { if (view.data && isCurrent()) render(view, regions, session); };
  view.rerender = rerender;

  // topicPages reads a topic's partitions, in the state the filter names.
  const topicPages = (topic) => new PartitionPages(
    { mirror: name, topic: regexQuote(topic), state: view.stateFilter }, { pageSize: TOPIC_PAGE });
  // loadHistory reads the mirror's total series, and the per-topic ones
  // while a topic is open. Without mirror the answer has each mirror's
  // total only: its size does not grow with the mirror's topics.
  const loadHistory = async () => {
    const perTopic = view.open.size > 0;
    const history = await get('/v1/history', perTopic ? { mirror: name } : undefined).catch(() => null);
    if (history) Object.assign(view, { history, historyPerTopic: perTopic });
  };
  // settle re-renders once the reads are done, whatever their outcome.
  const settle = (...reads) => Promise.allSettled(reads).then(rerender);
  view.toggle = (topic) => {
    if (view.open.delete(topic)) {
      rerender();
      return;
    }
    const pages = topicPages(topic);
    view.open.set(topic, pages);
    rerender();
    settle(pages.reload(), view.historyPerTopic ? null : loadHistory());
  };

  const stateSel = h('select', {
    onchange: (e) => {
      view.stateFilter = e.target.value;
      // The open topics show the partitions in that state: read again.
      for (const topic of view.open.keys()) view.open.set(topic, topicPages(topic));
      rerender();
      settle(...[...view.open.values()].map((p) => p.reload()));
    },
  }, h('option', { value: '' }, 'All states'), STATES.map((s) => h('option', { value: s }, s)));
  const textIn = h('input', { type: 'search', placeholder: 'topic name', oninput: (e) => { view.textFilter = e.target.value.trim().toLowerCase(); rerender(); } });
  const stateId = uid('f');
  const textId = uid('f');
  stateSel.id = stateId;
  textIn.id = textId;

  replace(main,
    h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/' }, 'Overview'), ' / ', h('span', { 'aria-current': 'page' }, name)),
    regions.head,
    regions.attention,
    h('section', { 'aria-labelledby': 'pic-h' }, h('h2', { id: 'pic-h' }, 'Partitions and flow'), regions.pictures),
    h('section', { 'aria-labelledby': 'topics-h' },
      h('div', { class: 'section-head' },
        h('h2', { id: 'topics-h' }, 'Topics'),
        session.canOperate ? h('button', { type: 'button', class: 'btn primary', onclick: () => addTopicsDialog(name, refreshNow) }, 'Add topics…') : null),
      h('div', { class: 'filters', role: 'search', 'aria-label': 'Filter topics and partitions' },
        h('div', { class: 'field inline' }, h('label', { for: stateId }, 'State'), stateSel),
        h('div', { class: 'field inline' }, h('label', { for: textId }, 'Filter'), textIn)),
      regions.topics),
    regions.schemas,
    h('section', { 'aria-labelledby': 'tr-h' }, h('h2', { id: 'tr-h' }, 'Translate an offset'), regions.translate));

  let refreshNow = () => {};
  const page = {
    /** wants says whether an event may change what this page shows. */
    wants: (ev) => !ev.mirror || ev.mirror === name,
    /**
     * refresh reads what the page shows. change.topics names the topics
     * the events since the last refresh were about (null: any); an open
     * topic's rows are read again only when it is among them. change.poll
     * is a poll, when lag and rates have moved: everything is read, the
     * history included.
     */
    async refresh(change = { poll: true, topics: null }) {
      const first = !view.data;
      const reread = [...view.open].filter(([topic]) => change.poll || !change.topics || change.topics.has(topic))
        .map(([, pages]) => pages.reload().catch(() => {}));
      let mirror;
      let topics;
      try {
        [mirror, topics] = await Promise.all([
          get(`/v1/mirrors/${seg(name)}`),
          get(`/v1/mirrors/${seg(name)}/topics`),
          first || change.poll ? loadHistory() : null,
          view.errors.reload().catch(() => {}),
          view.tails.reload().catch(() => {}),
          ...reread,
        ]);
      } catch (err) {
        if (!isCurrent()) return;
        if (err instanceof ApiError && err.status === 404) {
          replace(main, h('section', { class: 'empty-state' }, h('h1', {}, `No mirror ${name}`),
            h('p', {}, 'It does not exist, or it was just deleted.'), h('a', { class: 'btn', href: '#/' }, 'Back to the overview')));
          page.refresh = async () => {};
          return;
        }
        if (!view.data) replace(regions.head, h('h1', {}, name), h('p', { class: 'error', role: 'alert' }, err.message));
        throw err;
      }
      if (!isCurrent()) return;
      view.data = { mirror, topics: topics.topics };
      const names = new Set(view.data.topics.map((t) => t.topic));
      for (const topic of view.open.keys()) if (!names.has(topic)) view.open.delete(topic);
      if (first) {
        view.translate = translateForm(name, () => view.data.topics);
        replace(regions.translate, view.translate.el);
      }
      view.translate.update();
      rerender();
    },
  };
  refreshNow = () => page.refresh();
  view.actions = {
    pause: (t) => pauseDialog(name, t, refreshNow),
    resume: (t) => resumeDialog(name, t, refreshNow),
    remove: (t) => removeDialog(name, t, refreshNow),
    restart: (t) => restartDialog(name, t, refreshNow),
    sync: () => syncDialog(name, refreshNow),
    check: () => checkDialog(name, view.data.topics),
    config: () => configDialog(view.data.mirror, refreshNow),
    del: () => deleteDialog(view.data.mirror, view.data.topics),
  };
  return page;
}

function render(view, regions, session) {
  const { mirror } = view.data;
  keepFocus(document.getElementById('main'), () => {
    replace(regions.head, headView(mirror, session, view.actions));
    replace(regions.attention, errorsView(mirror.status, view.errors, view.rerender), tailsView(view.tails, view.rerender));
    replace(regions.pictures, picturesView(mirror, view.history));
    replace(regions.topics, topicsView(view, session));
    replace(regions.schemas, schemasView(mirror));
  });
}

function headView(m, session, actions) {
  return [
    h('h1', {}, m.name),
    h('dl', { class: 'facts' },
      h('div', {}, h('dt', {}, 'Source'), h('dd', { class: 'mono wrap' }, m.source.bootstrap_servers)),
      h('div', {}, h('dt', {}, 'Security'), h('dd', {}, [m.source.security_protocol || 'PLAINTEXT', m.source.sasl_mechanism].filter(Boolean).join(' · '))),
      // Shown for a mirror that writes its topics under other names (fan-in).
      m.effective_config?.[TOPIC_NAME_PREFIX] ? h('div', {}, h('dt', {}, 'Topic name prefix'),
        h('dd', { class: 'mono wrap', title: 'Each topic is written to the destination under this prefix and its source name' },
          m.effective_config[TOPIC_NAME_PREFIX])) : null,
      h('div', {}, h('dt', {}, 'Last metadata sync'), h('dd', {}, syncCell(m.last_sync))),
      h('div', {}, h('dt', {}, 'Partitions'), h('dd', {}, count(m.status?.partitions))),
      h('div', {}, h('dt', {}, 'Records/s'), h('dd', {}, rate(m.status?.records_per_sec))),
      h('div', {}, h('dt', {}, 'Lag'), h('dd', {}, count(m.status?.lag))),
      h('div', {}, h('dt', {}, 'Lag in time'), h('dd', { title: 'The age of the oldest source record not yet on the destination, the largest over the partitions (max_lag_ms)' },
        m.status?.max_lag_ms === null || m.status?.max_lag_ms === undefined ? '—' : seconds(m.status.max_lag_ms / 1000))),
      // Shown once the mirror's replication throttle has held a copy back.
      m.status?.throttled_seconds > 0 ? h('div', {}, h('dt', {}, 'Throttled'),
        h('dd', { title: 'How long copies have waited for mirror.replication.throttled.rate, over all partitions' },
          seconds(m.status.throttled_seconds))) : null,
      // Shown while new owners re-align partitions they took over.
      m.status?.realigning > 0 ? h('div', {}, h('dt', {}, 'Re-aligning'),
        h('dd', { title: 'Partitions their new owner is re-aligning after taking them over' },
          count(m.status.realigning))) : null),
    m.state === 'needs_credentials' ? credentialsNeeded(m) : null,
    m.last_sync && !m.last_sync.ok ? syncErrors(m.last_sync) : null,
    session.canOperate ? h('div', { class: 'actions', role: 'group', 'aria-label': 'Mirror actions' },
      h('button', { type: 'button', class: 'btn', onclick: actions.sync, 'data-focus-key': 'act-sync' }, 'Sync now…'),
      h('button', { type: 'button', class: 'btn', onclick: actions.check, 'data-focus-key': 'act-check' }, 'Check clusters…'),
      session.canAdmin ? h('button', { type: 'button', class: 'btn', onclick: actions.config, 'data-focus-key': 'act-config' }, 'Edit config…') : null,
      session.canAdmin ? h('button', { type: 'button', class: 'btn danger', onclick: actions.del, 'data-focus-key': 'act-delete' }, 'Delete mirror…') : null) : null,
  ];
}

// credentialsNeeded explains a mirror restored without its secrets: nothing
// of it runs until they are set again.
function credentialsNeeded(m) {
  const missing = (m.missing_credentials || []).join(', ');
  return h('div', { class: 'callout error-box', role: 'status' }, h('p', {},
    h('strong', {}, 'Needs credentials. '),
    'This mirror was restored from __mirror_state, which never holds secrets. Its partitions keep their state and its metadata sync waits until ',
    h('span', { class: 'mono' }, missing), ' ', (m.missing_credentials || []).length > 1 ? 'are' : 'is',
    ' set again with ', h('span', { class: 'mono' }, `PATCH /v1/mirrors/${m.name}`), '.'));
}

function syncErrors(s) {
  const bad = failedKinds(s);
  const label = new Map(SYNC_KINDS);
  return h('div', { class: 'callout error-box' }, h('p', {}, h('strong', {}, 'The last metadata sync failed:')),
    h('ul', {}, bad.map((k) => h('li', {}, h('span', { class: 'mono', title: label.get(k) }, k), ': ', s[k].error || 'failed'))));
}

// picturesView draws the lifecycle with the mirror's partitions per state,
// and its total lag and rate over the recent minutes.
function picturesView(m, history) {
  const total = history.series.find((s) => s.mirror === m.name && !s.topic);
  const pts = total ? total.points : [];
  const win = history.window_seconds || 600;
  return [
    h('figure', { class: 'card' }, lifecycle(m.status?.states || {}), h('figcaption', {}, 'Where each partition is in its lifecycle now')),
    h('div', { class: 'chart-pair' },
      h('figure', { class: 'card' }, lagChart(pts, 'Lag, all topics', win, m.status?.states?.FAILED),
        h('figcaption', {}, 'Lag (records), all topics')),
      h('figure', { class: 'card' }, lagTimeChart(pts, 'Lag in seconds, all topics', win, m.status?.states?.FAILED),
        h('figcaption', {}, 'Lag (seconds: age of the oldest record not copied), all topics')),
      h('figure', { class: 'card' }, lineChart({ points: pts.map((p) => ({ at: p.at, value: p.records_per_sec })), label: 'Records per second, all topics', format: rate, windowSec: win, cls: 'rate' }),
        h('figcaption', {}, 'Records/s, all topics'))),
  ];
}

// lagChart draws history points' lag, coloured by lagTone.
function lagChart(points, label, windowSec, failed) {
  const lag = points.map((p) => ({ at: p.at, value: p.lag }));
  return lineChart({ points: lag, label, windowSec, tone: lagTone(lag, failed) });
}

// lagTimeChart draws history points' lag in time (lag_seconds: the age of
// the oldest source record not yet on the destination), where known.
function lagTimeChart(points, label, windowSec, failed) {
  const lag = points.filter((p) => p.lag_seconds !== null && p.lag_seconds !== undefined)
    .map((p) => ({ at: p.at, value: p.lag_seconds }));
  return lineChart({ points: lag, label, format: seconds, windowSec, cls: 'lag-time', tone: lagTone(lag, failed) });
}

function topicsView(view, session) {
  const { topics } = view.data;
  if (!topics.length) {
    return h('div', { class: 'empty-state' }, h('p', {}, 'This mirror has no topics yet.'),
      session.canOperate ? h('p', {}, 'Use “Add topics…” to pick source topics by pattern.') : null);
  }
  const failedFirst = (a, b) => (b.states?.FAILED || 0) - (a.states?.FAILED || 0) || a.topic.localeCompare(b.topic);
  const shown = [...topics].sort(failedFirst).filter((t) => (!view.stateFilter || (t.states?.[view.stateFilter] || 0) > 0)
    && (!view.textFilter || [t.topic, destinationOf(t)].some((n) => n?.toLowerCase().includes(view.textFilter))));
  if (!shown.length) return h('p', { class: 'empty-state', role: 'status' }, 'No topic matches the filters.');
  const series = new Map(view.history.series.filter((s) => s.topic).map((s) => [s.topic, s.points]));
  return h('ul', { class: 'topics' }, shown.map((t) => topicItem(view, t, series.get(t.topic) || [], view.history.window_seconds || 600, session)));
}

function topicItem(view, t, points, win, session) {
  const open = view.open.has(t.topic);
  const panelId = `topic-panel-${t.topic}`;
  const toggle = h('button', {
    type: 'button', class: 'toggle', 'aria-expanded': String(open), 'aria-controls': panelId, 'data-focus-key': `toggle-${t.topic}`,
    onclick: () => view.toggle(t.topic),
  }, h('span', { class: 'chev', 'aria-hidden': 'true' }, open ? '▾' : '▸'), h('span', { class: 'topic-name mono' }, topicNamesNode(t)));
  const names = topicNames(t);
  const ro = t.read_only_enforced === true ? 'read-only enforced' : t.read_only_enforced === false ? 'read-only not enforced' : 'read-only unknown';
  return h('li', { class: `topic${t.states?.FAILED ? ' failed' : ''}`, 'data-topic': t.topic },
    h('div', { class: 'topic-row' },
      h('h3', { class: 'topic-title' }, toggle),
      h('div', { class: 'topic-facts' },
        h('span', {}, h('span', { class: 'label' }, 'Desired '), desiredBadge(t.desired_state)),
        h('span', {}, stateBadges(t.states)),
        h('span', {}, h('span', { class: 'label' }, 'Lag '), h('span', { class: 'lag' }, count(t.lag))),
        h('span', {}, h('span', { class: 'label' }, 'Rate '), rate(t.records_per_sec)),
        h('span', { class: `ro ${t.read_only_enforced ? 'yes' : 'no'}`, title: t.read_only_enforced === false ? 'The destination has no authorizer that could refuse other writers, or the topic is stopped.' : null }, ro)),
      session.canOperate ? topicButtons(view, t) : null),
    open ? h('div', { id: panelId, class: 'topic-panel' },
      h('div', { class: 'chart-pair' },
        h('figure', { class: 'card' }, lagChart(points, `Lag of ${names}`, win, t.states?.FAILED), h('figcaption', {}, `Lag of ${names}`)),
        h('figure', { class: 'card' }, lagTimeChart(points, `Lag in seconds of ${names}`, win, t.states?.FAILED), h('figcaption', {}, `Lag in seconds of ${names}`)),
        h('figure', { class: 'card' }, lineChart({ points: points.map((p) => ({ at: p.at, value: p.records_per_sec })), label: `Records per second of ${names}`, format: rate, windowSec: win, cls: 'rate' }), h('figcaption', {}, `Records/s of ${names}`))),
      partitionsPanel(view, t)) : null);
}

function topicButtons(view, t) {
  // Focus keys are by position, so focus survives an action that swaps the
  // buttons: after Pause it stays on the first button, now Resume; after
  // Remove, focus.js's trail finds Restart in its place. A button's key is
  // the list's length when it is made, so b adds each button to the list
  // before the next is made, and no two buttons share a key.
  const list = [];
  const b = (label, fn, cls = '') => list.push(h('button', {
    type: 'button', class: `btn small ${cls}`, onclick: () => fn(t), 'data-focus-key': `action-${list.length}-${t.topic}`,
  }, label));
  const a = view.actions;
  if (t.desired_state === 'mirroring') { b('Pause', a.pause); b('Remove', a.remove, 'danger'); }
  if (t.desired_state === 'paused') { b('Resume', a.resume); b('Remove', a.remove, 'danger'); }
  if (t.desired_state === 'stopped') b('Restart', a.restart);
  return h('div', { class: 'topic-actions', role: 'group', 'aria-label': `Actions for ${t.topic}` }, list);
}

// partitionsPanel shows the rows of an open topic read so far, and offers
// the next page.
function partitionsPanel(view, t) {
  const pages = view.open.get(t.topic);
  if (!pages.loaded) {
    return pages.error
      ? h('p', { class: 'error', role: 'alert' }, `Could not read the partitions of ${t.topic}: ${pages.error.message}`)
      : h('p', { class: 'loading', role: 'status' }, `Reading the partitions of ${t.topic}…`);
  }
  const total = view.stateFilter ? (t.states?.[view.stateFilter] || 0) : t.partitions;
  return [
    pages.rows.length ? partitionsTable(t, pages.rows)
      : h('p', { class: 'empty-state', role: 'status' }, `No partition of ${t.topic} is ${view.stateFilter || 'known yet'}.`),
    moreButton(pages, { what: `partitions of ${t.topic}`, total: Math.max(total, pages.rows.length), focusKey: `more-${t.topic}`, rerender: view.rerender }),
    pages.error ? h('p', { class: 'error', role: 'alert' }, `Could not read more partitions of ${t.topic}: ${pages.error.message}`) : null,
  ];
}

// lastMirrored is the last record copied, "source → destination"; after a
// failover it is where a failback continues from.
function lastMirrored(p) {
  if (p.last_mirrored_source_offset === null || p.last_mirrored_source_offset === undefined) return '—';
  return `${count(p.last_mirrored_source_offset)} → ${count(p.last_mirrored_destination_offset)}`;
}

// partitionsTable shows rows, FAILED first.
function partitionsTable(t, rows) {
  const shown = [...rows].sort((a, b) => (b.state === 'FAILED') - (a.state === 'FAILED') || a.partition - b.partition);
  // The tail's column shows only for a topic where a failback kept one.
  const tails = rows.some((p) => p.divergent_tail);
  // So does the throttled time's, where the replication throttle held one back.
  const throttled = rows.some((p) => p.throttled_ms > 0);
  // Where the destination topic has another name (topic.name.prefix), the
  // offset columns say which topic their offsets are in.
  const dest = destinationOf(t);
  const cols = [
    ['Partition', 'num'], ['Source offset', 'num', null, dest && t.topic], ['Destination offset', 'num', null, dest],
    ['Lag', 'num'], ['State'], ['Owner'],
    ['Retries', 'num'], ['Lost', 'num'], throttled ? ['Throttled', 'num'] : null,
    ['Last mirrored', 'num', ' (source → destination offset)'],
    // Lag in time comes after the columns the describe table shares.
    tails ? ['Kept divergent tail'] : null, ['Lag in time', 'num', ' (age of the oldest record not copied)'], ['Progressed'], ['Error'],
  ].filter(Boolean);
  const names = topicNames(t);
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': `Partitions of ${names}`, tabindex: '0' },
    h('table', { class: 'data partitions stack' },
      h('caption', { class: 'visually-hidden' }, `Partitions of ${names}`),
      h('thead', {}, h('tr', {}, cols.map(([c, cls, more, topic]) => h('th', { scope: 'col', class: cls || null }, c,
        more ? h('span', { class: 'visually-hidden' }, more) : null,
        topic ? [h('br'), h('span', { class: 'col-topic mono' }, topic)] : null)))),
      // data-label names each cell where phone width stacks the columns.
      h('tbody', {}, shown.map((p) => h('tr', { class: p.state === 'FAILED' ? 'row-failed' : null },
        h('th', { scope: 'row', class: 'num', 'data-label': 'Partition' }, String(p.partition)),
        h('td', { class: 'num', 'data-label': 'Source offset' }, count(p.source_offset)),
        h('td', { class: 'num', 'data-label': 'Destination offset' }, count(p.destination_offset)),
        h('td', { class: 'num', 'data-label': 'Lag' }, count(p.lag)),
        // A new owner re-aligning the partition keeps the state it was left in
        // until alignment has found where to resume: say so in words.
        h('td', { 'data-label': 'State' }, stateBadge(p.state), p.realigning ? h('span', {
          class: 'muted', title: 'Its new owner is re-aligning it after taking it over',
        }, ' · re-aligning') : null),
        h('td', { class: 'mono', 'data-label': 'Owner' }, p.owner || '—', p.owner && !p.lease_live ? h('span', { class: 'badge off' }, 'lease not live') : null),
        h('td', { class: 'num', 'data-label': 'Retries' }, count(p.retry_attempt)),
        h('td', { class: 'num', 'data-label': 'Lost' }, count(p.lost_records)),
        throttled ? h('td', { class: 'num', 'data-label': 'Throttled' }, seconds(p.throttled_ms / 1000)) : null,
        h('td', { class: 'num', 'data-label': 'Last mirrored' }, lastMirrored(p)),
        tails ? h('td', { 'data-label': 'Kept divergent tail' }, p.divergent_tail ? tailText(p.divergent_tail) : '—') : null,
        h('td', { class: 'num', 'data-label': 'Lag in time' }, p.lag_ms === null || p.lag_ms === undefined ? '—' : seconds(p.lag_ms / 1000)),
        h('td', { 'data-label': 'Progressed' }, p.progressed_at ? [time(p.progressed_at), h('span', { class: 'muted' }, ` (${ago(p.progressed_at)})`)] : '—'),
        h('td', { class: 'error-cell', 'data-label': 'Error' }, p.error || ''))))));
}
