// A mirror topic has two names: its source topic's, which names it in
// every path, filter and action, and its destination topic's, the mirror's
// topic.name.prefix and the source name (fan-in: orders of mirror east is
// written to east.orders). Wherever the console names a topic it shows
// both, "orders → east.orders", and the name once when they are the same,
// as for every topic of a mirror without a prefix.
//
// Each helper takes anything the API answers with topic and
// destination_topic: a topic, a describe row, an add's match, a wait's
// progress, a continuation, a conflict.

import { h } from './dom.js';

/** destinationOf is t's destination name when it differs from the source's, else null. */
export function destinationOf(t) {
  const dest = t?.destination_topic;
  return dest && dest !== t.topic ? dest : null;
}

/**
 * topicNames is t's names as text: "orders → east.orders", or "orders"
 * when they are the same. With partition, each name is of that partition:
 * "orders/0 → east.orders/0".
 */
export function topicNames(t, partition) {
  const at = partition === undefined || partition === null ? '' : `/${partition}`;
  const dest = destinationOf(t);
  return dest ? `${t.topic}${at} → ${dest}${at}` : `${t.topic}${at}`;
}

/**
 * topicNamesNode is topicNames as nodes, for inside an element: the arrow
 * is muted, and a line may break before it, not inside a name. Its text is
 * topicNames', so an accessible name made of it reads as shown.
 */
export function topicNamesNode(t, partition) {
  const dest = destinationOf(t);
  if (!dest) return topicNames(t, partition);
  const at = partition === undefined || partition === null ? '' : `/${partition}`;
  return h('span', { class: 'topic-names', title: `Source topic ${t.topic}, written to destination topic ${dest}` },
    h('span', { class: 'src' }, `${t.topic}${at}`), h('span', { class: 'arrow' }, ' → '), h('span', { class: 'dest' }, `${dest}${at}`));
}
