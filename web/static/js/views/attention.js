// What on a mirror's page needs someone's attention: the partitions with
// an error (FAILED, or retrying in their state), each error in full, and
// the divergent tails that failbacks kept. Each list is a bounded page of
// GET /v1/partitions (erroring=true, divergent_tail=true), with a control
// for the next; the counts come from the mirror's status.

import { h } from '../dom.js';
import { count } from '../format.js';
import { stateBadge } from '../badges.js';
import { moreButton } from '../partition_pages.js';
import { tailText } from './continuation.js';
import { topicNames } from '../topic_names.js';

/**
 * errorsView lists the partitions with an error, FAILED ones first among
 * those read. status is the mirror's; pages reads the erroring ones.
 */
export function errorsView(status, pages, rerender) {
  const failed = status?.states?.FAILED || 0;
  const erroring = status?.erroring || 0;
  const rows = pages.rows || [];
  if (!failed && !erroring && !rows.length) return readError(pages, 'the partitions with an error');
  const shown = [...rows].sort((a, b) => (b.state === 'FAILED') - (a.state === 'FAILED'));
  return h('section', { class: 'callout error-box', 'aria-labelledby': 'att-h' },
    h('h2', { id: 'att-h' }, failed ? `${count(failed)} partition(s) FAILED` : `${count(erroring)} partition(s) reporting errors`),
    failed && erroring > failed ? h('p', {}, `${count(erroring)} partition(s) report an error, the FAILED ones among them.`) : null,
    scrolling('Partitions with an error', h('ul', { class: 'errors' }, shown.map((p) => h('li', {},
      stateBadge(p.state), ' ', h('strong', { class: 'mono' }, topicNames(p, p.partition)), ': ',
      h('span', { class: 'error-text' }, p.error || '(no message)'),
      p.retry_attempt ? h('span', { class: 'muted' }, ` (retry ${p.retry_attempt})`) : null)))),
    moreButton(pages, { what: 'partitions with an error', total: Math.max(erroring, rows.length), focusKey: 'more-errors', rerender }),
    readError(pages, 'more partitions with an error'));
}

/**
 * tailsView lists the divergent tails that failbacks kept: destination
 * records the source never had, which mirroring went on after. Nothing is
 * wrong, but someone may have to reprocess them, so they are not hidden in
 * the partition tables.
 */
export function tailsView(pages, rerender) {
  const kept = pages.rows || [];
  if (!kept.length) return readError(pages, 'the partitions that kept a divergent tail');
  const title = pages.hasMore ? `More than ${count(kept.length)} partitions kept a divergent tail` : `${count(kept.length)} partition(s) kept a divergent tail`;
  return h('section', { class: 'callout note-box', 'aria-labelledby': 'tails-h' },
    h('h2', { id: 'tails-h' }, title),
    h('p', {}, 'Added with continue and keep divergent tail: these destination records were written after the last failover and the source never had them. Mirroring goes on after them; reprocess them if they matter.'),
    scrolling('Partitions with a kept divergent tail', h('ul', { class: 'errors' }, kept.map((p) => h('li', {},
      h('strong', { class: 'mono' }, topicNames(p, p.partition)), ': ', tailText(p.divergent_tail), ' (destination offsets)')))),
    moreButton(pages, { what: 'partitions with a kept tail', focusKey: 'more-tails', rerender }),
    readError(pages, 'more partitions with a kept tail'));
}

// scrolling bounds a long list's height; it scrolls, with the keyboard too.
function scrolling(label, list) {
  return h('div', { class: 'list-scroll', role: 'region', 'aria-label': label, tabindex: '0' }, list);
}

// readError says that a page of what could not be read, or returns null.
function readError(pages, what) {
  if (!pages.error) return null;
  return h('p', { class: 'error', role: 'alert' }, `Could not read ${what}: ${pages.error.message}`);
}
