// Partitions a page at a time. The console never reads every partition of
// a mirror: a mirror's page shows the server's aggregates, and reads
// partition rows only for what the user opens (a topic, a dialog) or what
// needs attention (errors, kept divergent tails), through bounded,
// filtered requests of GET /v1/partitions.

import { get } from './api.js';
import { h } from './dom.js';
import { count } from './format.js';

/** PAGE_LIMIT is the server's largest page (MaxPartitionPageLimit). */
const PAGE_LIMIT = 5000;

/**
 * PartitionPages holds the rows read so far of one filtered query of
 * GET /v1/partitions, and the cursor to the rest. more() reads the next
 * page; reload() reads as many rows as are shown again, in one request,
 * so that a refresh costs one request however far the user has read.
 * Calls run one after another: a reload never loses a page read meanwhile.
 */
export class PartitionPages {
  constructor(query, { pageSize = 100 } = {}) {
    this.query = query;
    this.pageSize = pageSize;
    this.rows = null; // null until the first page arrives
    this.cursor = null;
    this.error = null;
    this.queue = Promise.resolve();
  }

  /** loaded says whether the first page has arrived. */
  get loaded() {
    return this.rows !== null;
  }

  /** hasMore says whether rows past those shown exist. */
  get hasMore() {
    return Boolean(this.cursor);
  }

  reload() {
    return this.run(async () => {
      const limit = Math.min(Math.max(this.rows?.length || 0, this.pageSize), PAGE_LIMIT);
      const page = await get('/v1/partitions', { ...this.query, limit });
      this.rows = page.partitions;
      this.cursor = page.next_cursor || null;
    });
  }

  more() {
    return this.run(async () => {
      if (!this.cursor) return;
      const page = await get('/v1/partitions', { ...this.query, limit: this.pageSize, cursor: this.cursor });
      this.rows = [...this.rows, ...page.partitions];
      this.cursor = page.next_cursor || null;
    });
  }

  // run queues fn after the calls before it; an error is kept in error for
  // the view, and thrown.
  run(fn) {
    const next = this.queue.then(fn).then(() => { this.error = null; }, (err) => {
      this.error = err;
      throw err;
    });
    this.queue = next.catch(() => {});
    return next;
  }
}

/**
 * moreButton offers the next page of pages, or returns null when none is
 * left: "Show 100 more", and how many of total (when known) are shown.
 * rerender draws the new rows. Focus stays on the button that takes this
 * one's place, found by its focus key, so a keyboard user can press it
 * again; after the last page it goes to orFocus, when given.
 */
export function moreButton(pages, { what, total, focusKey, rerender, orFocus }) {
  if (!pages.loaded || !pages.hasMore) return null;
  const shown = pages.rows.length;
  const next = total === undefined ? pages.pageSize : Math.max(1, Math.min(pages.pageSize, total - shown));
  let busy = false;
  // aria-disabled, not disabled: a disabled button drops the focus.
  const btn = h('button', {
    type: 'button', class: 'btn small', 'data-focus-key': focusKey,
    onclick: async () => {
      if (busy) return;
      busy = true;
      btn.setAttribute('aria-disabled', 'true');
      btn.setAttribute('aria-busy', 'true');
      await pages.more().catch(() => {}); // pages.error says why, under the rows
      const focused = document.activeElement === btn;
      rerender();
      if (focused && !btn.isConnected) {
        (document.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`) || orFocus)?.focus();
      }
    },
  }, `Show ${count(next)} more`);
  return h('p', { class: 'more' }, btn, ' ',
    h('span', { class: 'muted' }, total === undefined ? `${count(shown)} ${what} shown` : `${count(shown)} of ${count(total)} ${what} shown`));
}
