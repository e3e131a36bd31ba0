// The result of a topic action called with ?wait: the server waits until
// every partition reaches the action's target state (or some went FAILED, or
// the time ran out) and answers with how far each topic got. The dialogs
// show that answer, not a guess of what will happen next.

import { h } from '../dom.js';
import { count } from '../format.js';
import { topicNames } from '../topic_names.js';

/** WAIT is how long an action waits for its partitions; more is not an error. */
export const WAIT = '20s';

/** waitingNote says what the dialog is waiting for while the call runs. */
export function waitingNote(target) {
  return `Done; waiting up to ${WAIT.replace('s', ' s')} for the partitions to reach ${target}…`;
}

/**
 * waitReport renders lead (what was done) and r.wait: per topic, the
 * partitions in the target state out of the total, and the FAILED ones.
 * It returns the dialog's content and the toast's text.
 */
export function waitReport(lead, r) {
  const w = r.wait;
  if (!w) return { node: h('p', { class: 'ok' }, lead), text: lead };
  const target = w.topics[0]?.target_state || '';
  const failed = w.topics.reduce((n, t) => n + t.failed, 0);
  const secs = (w.waited_ms / 1000).toFixed(1);
  let summary;
  if (w.completed) summary = `Every partition is ${target} (after ${secs} s).`;
  else if (failed) summary = `${count(failed)} partition(s) FAILED (after ${secs} s): see the partition table for the error.`;
  else summary = `Not every partition is ${target} after ${secs} s; the rest continue in the background.`;
  const node = h('div', { class: 'wait-report' },
    h('p', { class: w.completed ? 'ok' : 'warn' }, lead, ' ', summary),
    h('ul', { class: 'wait-topics', 'aria-label': `Partitions ${target} per topic` }, w.topics.map((t) =>
      h('li', { 'data-topic': t.topic },
        h('span', { class: `badge st-${t.ready === t.total ? t.target_state : 'PREPARING'}` }, `${count(t.ready)}/${count(t.total)} ${t.target_state}`),
        t.failed ? h('span', { class: 'badge st-FAILED' }, `${count(t.failed)} FAILED`) : null,
        ' ', h('span', { class: 'mono' }, topicNames(t))))));
  return { node, text: `${lead} ${summary}` };
}
