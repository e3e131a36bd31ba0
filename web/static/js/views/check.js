// A mirror's check (preflight): what it needs of its source and of this
// server's destination, asked with kmirror's own credentials. It changes
// nothing on either cluster, so the dialog stays open to check again, after
// a grant or with another pattern, and the result is shown in full: a row
// per check, and for each that does not pass what to grant or change.

import { post, seg } from '../api.js';
import { h } from '../dom.js';
import { modal, button, field } from '../dialogs.js';
import { checkBadge } from '../badges.js';

// CHECK_TAKES is the most a check takes: the server gives each cluster 10 s.
const CHECK_TAKES = '20 s';

// TOPICS_NAMED is how many of the checked topics the summary names.
const TOPICS_NAMED = 10;

// MEANING says what an overall status means for the mirror.
const MEANING = {
  pass: 'Everything the mirror needs is allowed.',
  warn: 'The copy will work; a feature beside it will not (config, group offset or ACL sync, or read-only enforcement).',
  fail: 'The copy will not work until what the failed rows name is granted or changed.',
};

const ROW_CLASS = { fail: 'row-failed', warn: 'row-warn' };

/**
 * checkDialog checks what mirror needs of its clusters, for its own topics
 * or for the source topics a pattern matches. topics are the mirror's, as
 * the page has them: the hint counts those checked by default.
 */
export function checkDialog(mirror, topics) {
  const dlg = modal(`Check the clusters of ${mirror}`, { wide: true });
  const pattern = h('input', { type: 'text', name: 'pattern', autocomplete: 'off', spellcheck: 'false', class: 'mono' });
  const rf = h('input', { type: 'number', name: 'rf', min: '1', max: '32767', inputmode: 'numeric' });
  // The rows follow the summary, outside the status line: a screen reader
  // hears the summary, and reads the table when it chooses to.
  const results = h('div', { class: 'check-results' });
  const own = topics.filter((t) => t.desired_state !== 'stopped').length;
  let label = 'Run the checks';
  const busy = (on) => {
    run.disabled = on;
    run.textContent = on ? 'Checking…' : label;
    if (on) run.setAttribute('aria-busy', 'true');
    else run.removeAttribute('aria-busy');
  };
  const run = button(label, async () => {
    const body = {};
    if (pattern.value.trim()) body.topic = pattern.value.trim();
    if (rf.value) body.replication_factor = Number(rf.value);
    busy(true);
    results.replaceChildren();
    dlg.status.replaceChildren(h('p', { class: 'loading' },
      `Checking the source and the destination; this takes up to ${CHECK_TAKES}…`));
    try {
      const r = await post(`/v1/mirrors/${seg(mirror)}:check`, Object.keys(body).length ? body : undefined);
      dlg.status.replaceChildren(summary(r));
      results.replaceChildren(checksTable(r.checks, `Checks of ${r.mirror}`));
      label = 'Check again';
      busy(false);
      // Close takes the focus, but the summary above the rows is what is
      // scrolled into sight: at phone width, where the rows do not scroll
      // on their own, Close is then below the fold.
      close.focus({ preventScroll: true });
      dlg.status.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      dlg.error(err);
      busy(false);
      run.focus();
    }
  }, { primary: true });
  const close = button('Close', () => dlg.close());
  // Enter in a field runs the checks, as it would submit a form.
  for (const input of [pattern, rf]) {
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !run.disabled) run.click();
    });
  }
  dlg.body.append(
    h('p', {}, 'Checks, with kmirror’s own credentials, what this mirror needs of its source and of this server’s destination: ',
      'describing and reading the topics, their configs and consumer groups; creating, writing and configuring the destination topics, ',
      'and the ACLs that keep them read-only. Nothing is changed on either cluster. It takes up to ', CHECK_TAKES, '.'),
    field('Topic pattern (optional)', pattern, own
      ? `Empty checks the mirror’s ${own} topic(s) that are not stopped. An RE2 pattern checks the source topics it matches instead, before they are added.`
      : 'The mirror has no topics to check yet: an RE2 pattern checks the source topics it matches, before they are added.'),
    field('Replication factor (optional)', rf,
      'Of destination topics not created yet; empty uses the factor the topics were added with, or the destination default.'));
  dlg.status.after(results);
  dlg.footer.append(close, run);
  run.focus();
}

// summary is the overall status, how many checks had each, what that means,
// which checks did not pass (their rows may be scrolled out of sight) and
// the topics checked.
function summary(r) {
  const n = { fail: 0, warn: 0, pass: 0 };
  for (const c of r.checks) n[c.status] = (n[c.status] || 0) + 1;
  const counts = n.pass === r.checks.length ? `All ${r.checks.length} checks pass.`
    : `${r.checks.length} checks: ${Object.entries(n).filter(([, k]) => k).map(([s, k]) => `${k} ${s}`).join(', ')}.`;
  const named = r.topics.slice(0, TOPICS_NAMED);
  const more = r.topics.length - named.length;
  return h('div', { class: 'check-summary' },
    h('p', {}, h('strong', {}, 'Overall: '), checkBadge(r.status), ' ', counts, ' ', MEANING[r.status] || ''),
    notPassed(r.checks),
    h('p', {}, h('strong', {}, 'Topics checked: '), r.topics.length
      ? [h('span', { class: 'mono' }, named.join(', ')), more > 0 ? ` and ${more} more` : '', '.']
      : 'none.'));
}

// notPassed names the checks that failed, then those that warned; null
// when every check passed.
function notPassed(checks) {
  const named = (status) => checks.filter((c) => c.status === status).map((c) => `${c.check} (${c.cluster})`).join(', ');
  const failed = named('fail');
  const warned = named('warn');
  if (!failed && !warned) return null;
  return h('p', {},
    failed ? [h('strong', {}, 'Failed: '), failed, '. '] : null,
    warned ? [h('strong', {}, 'Warned: '), warned, '.'] : null);
}

// PREFLIGHT_FAILED is the problem type of a topics:add that the checks
// refused; its checks are the failed rows.
const PREFLIGHT_FAILED = 'urn:kmirror:problem:preflight-failed';

/**
 * failedChecks returns the failed rows of an error that is topics:add
 * refused by the checks (409 preflight-failed), or null for any other.
 */
export function failedChecks(err) {
  const p = err?.problem;
  return err?.status === 409 && p?.type === PREFLIGHT_FAILED && Array.isArray(p.checks) && p.checks.length ? p.checks : null;
}

/**
 * checksTable shows a row per check, a group per cluster in the server's
 * order (the source, then the destination); name labels the region. What
 * to grant or change has a column only when a check did not pass. At phone
 * width each check is a card: its name and status, then the sentences.
 */
export function checksTable(checks, name) {
  const grants = checks.some((c) => c.status !== 'pass');
  const cols = ['Check', 'Status', 'Detail', grants ? 'To grant or change' : null].filter(Boolean);
  const clusters = [...new Set(checks.map((c) => c.cluster))];
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': name, tabindex: '0' },
    h('table', { class: 'data checks stack' },
      h('caption', { class: 'visually-hidden' }, `${name}, by cluster`),
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
      clusters.map((cluster) => h('tbody', {},
        h('tr', { class: 'group' }, h('th', { scope: 'rowgroup', colspan: String(cols.length) }, capitalized(cluster))),
        checks.filter((c) => c.cluster === cluster).map((c) => h('tr', { class: ROW_CLASS[c.status] || null },
          h('th', { scope: 'row', 'data-label': 'Check' }, c.check),
          h('td', { class: 'status', 'data-label': 'Status' }, checkBadge(c.status)),
          h('td', { class: 'prose detail', 'data-label': 'Detail' }, c.detail),
          grants ? h('td', { class: 'prose grant', 'data-label': 'To grant or change' }, c.status !== 'pass' && c.grant ? c.grant : '') : null))))));
}

const capitalized = (s) => s.charAt(0).toUpperCase() + s.slice(1);
