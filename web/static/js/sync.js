// A mirror's last metadata sync pass, as the overview and the mirror page
// show it: each kind of sync has its own result.

import { h } from './dom.js';
import { time, ago } from './format.js';

/** SYNC_KINDS lists each kind of a sync pass: its key in a result, and its name. */
export const SYNC_KINDS = [
  ['topic_configs', 'Topic configs'], ['partitions', 'Partition counts'], ['new_topics', 'New topics'],
  ['deleted_topics', 'Deleted topics'], ['group_offsets', 'Consumer group offsets'], ['acls', 'ACLs'], ['paused_topics', 'Paused topics'],
];

/** failedKinds returns the keys of the kinds that failed in the result s. */
export function failedKinds(s) {
  return SYNC_KINDS.map(([k]) => k).filter((k) => s[k] && !s[k].ok);
}

/** syncCell summarises the last metadata sync: OK or failed, and when. */
export function syncCell(s) {
  if (!s) return h('span', { class: 'muted' }, 'not yet');
  return h('span', { class: 'sync' },
    h('span', { class: `badge ${s.ok ? 'ok' : 'st-FAILED'}` }, s.ok ? 'OK' : `failed: ${failedKinds(s).join(', ') || 'see mirror'}`), ' ',
    time(s.finished_at), h('span', { class: 'muted' }, ` (${ago(s.finished_at)})`));
}
