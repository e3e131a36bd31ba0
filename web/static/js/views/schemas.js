// A mirror's Schema Registry sync, as its page shows it: the source
// registry, the last pass (when, whether it succeeded, its error in full)
// and each subject it copies, with its destination name, versions and mode.
// Shown only for a mirror that names a source registry; it is drawn from
// GET /v1/mirrors/{mirror}, so it refreshes with the rest of the page.

import { h } from '../dom.js';
import { count, time, ago } from '../format.js';
import { okBadge, schemaModeBadge } from '../badges.js';

/** schemasView is the mirror's Schemas section, or null without a source registry. */
export function schemasView(m) {
  const reg = m.source?.schema_registry;
  if (!reg) return null;
  const s = m.schema_sync;
  return h('section', { 'aria-labelledby': 'schemas-h', class: 'schemas' },
    h('h2', { id: 'schemas-h' }, 'Schemas'),
    h('dl', { class: 'facts' },
      h('div', {}, h('dt', {}, 'Source registry'), h('dd', { class: 'mono wrap' }, (reg.urls || []).join(', '))),
      reg.basic_auth_username ? h('div', {}, h('dt', {}, 'Signs in as'), h('dd', { class: 'mono' }, reg.basic_auth_username)) : null,
      s ? [
        h('div', {}, h('dt', {}, 'Last schema sync'), h('dd', {}, when(s.finished_at, okBadge(s.ok, 'failing')))),
        h('div', {}, h('dt', {}, 'Last success'), h('dd', {}, s.ok ? when(s.finished_at) : when(s.last_ok_at))),
        h('div', {}, h('dt', {}, 'Subjects'), h('dd', {}, count(s.subjects?.length ?? 0))),
        h('div', {}, h('dt', {}, 'Versions'), h('dd', {}, count(s.versions))),
        h('div', {}, h('dt', {}, 'Copied by the last pass'), h('dd', {}, count(s.copied))),
        s.soft_deleted > 0 ? h('div', {}, h('dt', {}, 'Soft-deleted'), h('dd', {}, count(s.soft_deleted))) : null,
        s.failed > 0 ? h('div', {}, h('dt', {}, 'Failed subjects'), h('dd', { class: 'error' }, count(s.failed))) : null,
      ] : null),
    s ? [passError(s), subjectsTable(m.name, s)]
      : h('p', { class: 'empty-state', role: 'status' },
        'Waiting for the first schema sync (a server with --destination-schema-registry-url runs it).'));
}

// when shows a time as the console does elsewhere: local, ISO on hover,
// and how long ago; badge goes before it.
function when(iso, badge = null) {
  if (!iso) return h('span', { class: 'muted' }, 'never');
  return h('span', { class: 'sync' }, badge, badge ? ' ' : null, time(iso), h('span', { class: 'muted' }, ` (${ago(iso)})`));
}

// passError shows why the last pass failed as a whole, or how many
// subjects failed when only some did.
function passError(s) {
  if (s.ok) return null;
  return h('div', { class: 'callout error-box' },
    h('p', {}, h('strong', {}, 'The last schema sync failed'), s.error ? ':' : `: ${count(s.failed)} subject(s) could not be copied, see below.`),
    s.error ? h('p', { class: 'error-text mono wrap' }, s.error) : null);
}

// subjectsTable lists the pass's subjects, failed ones first.
function subjectsTable(mirror, s) {
  const subjects = s.subjects || [];
  if (!subjects.length) {
    return s.error ? null : h('p', { class: 'empty-state', role: 'status' },
      'No subject to copy: the source registry has no <topic>-key or <topic>-value subject of the topics this mirror copies.');
  }
  const shown = [...subjects].sort((a, b) => (!!b.error - !!a.error) || a.source.localeCompare(b.source));
  const label = `Schema subjects of ${mirror}`;
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': label, tabindex: '0' },
    h('table', { class: 'data subjects stack' },
      h('caption', { class: 'visually-hidden' }, label),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Source subject'), h('th', { scope: 'col' }, 'Destination subject'),
        h('th', { scope: 'col', class: 'num' }, 'Versions'), h('th', { scope: 'col' }, 'Copied by the last pass'),
        h('th', { scope: 'col' }, 'Mode'), h('th', { scope: 'col' }, 'Error'))),
      // data-label names each cell where phone width stacks the columns.
      h('tbody', {}, shown.map((sub) => h('tr', { class: sub.error ? 'row-failed' : null, 'data-subject': sub.source },
        h('th', { scope: 'row', class: 'mono', 'data-label': 'Source subject' }, sub.source),
        h('td', { class: 'mono', 'data-label': 'Destination subject' }, sub.destination),
        h('td', { class: 'num', 'data-label': 'Versions' }, count(sub.versions)),
        h('td', { class: 'mono', 'data-label': 'Copied by the last pass' }, (sub.copied || []).join(', ') || '—'),
        h('td', { 'data-label': 'Mode' }, sub.mode ? schemaModeBadge(sub.mode) : h('span', { class: 'muted' }, 'not set')),
        h('td', { class: 'error-cell', 'data-label': 'Error' }, sub.error || ''))))));
}
