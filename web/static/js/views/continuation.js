// The plan of an add with continue (fail back), from its dry run: what
// each partition would do with what its destination already holds, shown
// before anything starts. A partition that would fail is marked in words
// and with a sign, not by colour alone, and the server's reason is shown in
// full under its row.

import { h } from '../dom.js';
import { count } from '../format.js';
import { topicNamesNode } from '../topic_names.js';

// OUTCOMES names each outcome for people; fail carries a sign as well as
// its colour.
const OUTCOMES = {
  copy: { text: 'copy', cls: 'st-PREPARING' },
  resume: { text: 'resume', cls: 'st-MIRRORING' },
  continue: { text: 'continue', cls: 'st-MIRRORING' },
  fail: { text: '✕ would fail', cls: 'st-FAILED' },
};

/** tailText describes a divergent tail: its records and destination range. */
export function tailText(t) {
  if (!t) return '—';
  const last = t.end_offset - 1;
  const range = last > t.start_offset ? `${count(t.start_offset)}–${count(last)}` : count(t.start_offset);
  return `${count(t.records)} record(s) at ${range}`;
}

function proofText(p) {
  if (p.proof === 'offset_map') return p.proven_by ? `offset map of ${p.proven_by}` : 'offset map';
  if (p.proof === 'records') return 'records compared';
  return p.proven_by ? `(mirror ${p.proven_by})` : '—';
}

function overlapText(p) {
  if (p.overlap_source_offset === null || p.overlap_source_offset === undefined) return '—';
  return `${count(p.overlap_source_offset)} → ${count(p.overlap_destination_offset)}`;
}

/**
 * continuationPlan sums up a dry run's continuation: the partitions that
 * would start (copy, resume or continue), the source records they would
 * copy, those keeping a divergent tail, and those that would fail.
 */
export function continuationPlan(topics) {
  const plan = { partitions: 0, starting: 0, toCopy: 0, tails: 0, failing: [] };
  for (const t of topics) {
    for (const p of t.partitions) {
      plan.partitions += 1;
      if (p.outcome === 'fail') {
        plan.failing.push({ topic: t.topic, ...p });
        continue;
      }
      plan.starting += 1;
      plan.toCopy += p.records_to_copy;
      if (p.divergent_tail) plan.tails += 1;
    }
  }
  return plan;
}

/** summaryText is the plan in one sentence. */
export function summaryText(plan) {
  let s = `${count(plan.starting)} partition(s) continue, ${count(plan.toCopy)} record(s) to copy`;
  if (plan.tails) s += `, ${count(plan.tails)} keeping a divergent tail`;
  if (plan.failing.length) s += `; ${count(plan.failing.length)} would fail`;
  return `${s}.`;
}

/**
 * continuationView renders the plan: the summary, why adding is not offered
 * when a partition would fail, and the table of partitions.
 */
export function continuationView(topics, plan, { keepDivergent }) {
  const failing = plan.failing.length;
  const tailRefused = plan.failing.some((p) => p.divergent_tail);
  const ways = ['leave its topic out of the pattern'];
  if (tailRefused && !keepDivergent) ways.push('keep the divergent tail');
  return [
    h('p', {}, h('strong', {}, summaryText(plan)), ' Nothing has changed yet.'),
    failing ? h('p', { class: 'refusal' }, h('span', { 'aria-hidden': 'true' }, '⚠ '),
      h('strong', {}, 'Adding is not offered while a partition would fail:'),
      ` it would go FAILED at once. To go on, ${ways.join(', or ')}, and preview again. The reason is under each failing row.`) : null,
    h('div', { class: 'table-wrap small tall', role: 'region', 'aria-label': 'What each partition would do', tabindex: '0' },
      h('table', { class: 'data continuation' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Topic'),
          h('th', { scope: 'col', class: 'num' }, 'Partition'),
          h('th', { scope: 'col' }, 'Outcome'),
          h('th', { scope: 'col' }, 'Proof'),
          h('th', { scope: 'col', class: 'num' }, 'Overlap', h('span', { class: 'visually-hidden' }, ' (source → destination offset)'), h('br'), h('span', { class: 'unit', 'aria-hidden': 'true' }, 'source → dest.')),
          h('th', { scope: 'col', class: 'num' }, 'Records to copy'),
          h('th', { scope: 'col' }, 'Divergent tail'))),
        topics.map((t) => h('tbody', { 'data-topic': t.topic }, t.partitions.flatMap((p) => partitionRows(t, p)))))),
  ];
}

function partitionRows(t, p) {
  const o = OUTCOMES[p.outcome] || { text: p.outcome, cls: 'st-UNKNOWN' };
  const fail = p.outcome === 'fail';
  const row = h('tr', { class: fail ? 'row-failed' : null, 'data-outcome': p.outcome },
    h('th', { scope: 'row', class: 'mono' }, topicNamesNode(t), t.destination_missing ? h('span', { class: 'muted' }, ' (new on the destination)') : null),
    h('td', { class: 'num' }, String(p.partition)),
    h('td', {}, h('span', { class: `badge ${o.cls}` }, o.text)),
    h('td', {}, proofText(p)),
    h('td', { class: 'num' }, overlapText(p)),
    h('td', { class: 'num' }, fail ? '—' : count(p.records_to_copy)),
    h('td', {}, tailText(p.divergent_tail)));
  if (!fail) return [row];
  return [row, h('tr', { class: 'row-failed detail' },
    h('td', { colspan: '7', class: 'error-cell' }, h('strong', {}, `Why ${t.topic}/${p.partition} would fail: `), p.detail))];
}
