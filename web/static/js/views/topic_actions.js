// Topic actions. Each dialog shows what the action will touch before it
// acts: the matching source topics and their partitions, or the records
// not yet mirrored, and reports the result or the server's error. Every
// action is called with ?wait, so the result says how many partitions
// reached the target state (wait_report.js).

import { post, seg } from '../api.js';
import { h, uid } from '../dom.js';
import { count, regexQuote } from '../format.js';
import { PartitionPages, moreButton } from '../partition_pages.js';
import { modal, button, runAction, field } from '../dialogs.js';
import { WAIT, waitingNote, waitReport } from './wait_report.js';
import { continuationPlan, continuationView } from './continuation.js';
import { checksTable, failedChecks } from './check.js';
import { destinationOf, topicNames } from '../topic_names.js';

const topicsPath = (mirror, action) => `/v1/mirrors/${seg(mirror)}/topics:${action}`;
const exactly = (topic) => ({ topic: regexQuote(topic) });

// act posts a topic action with ?wait and query's other parameters, saying
// in the dialog what it waits for while the call runs.
function act(dlg, mirror, action, body, target, query = {}) {
  dlg.note(waitingNote(target));
  return post(topicsPath(mirror, action), body, { ...query, wait: WAIT });
}

// The words of a refusal by the checks, for each action that adds.
const ADDING = { verb: 'Add', past: 'added', does: 'adds', ahead: 'Adding' };
const RESTARTING = { verb: 'Restart', past: 'restarted', does: 'restarts' };

/**
 * checksRefusal shows in dlg a topics:add that the checks of the clusters
 * refused (409 preflight-failed): the status says that nothing was done,
 * the failed rows with what to grant follow it, and "<verb> without the
 * checks" is offered beside confirm, never in its place, for brokers that
 * do not say what kmirror may do. skip(button) sends the same request with
 * skip_checks and returns what runAction returned; offered() says whether
 * there is one to send. refusedBy is runAction's refused hook; refuse shows
 * rows already read (ahead: a dry run's, the action is still to come).
 */
function checksRefusal(dlg, mirror, confirm, words, { skip, offered = () => true }) {
  // The failed checks follow the status line, outside it, as in the check
  // dialog: the status says what was refused, the rows are read when chosen.
  const region = h('div', { class: 'check-results' });
  dlg.status.after(region);
  const label = `${words.verb} without the checks`;
  const anyway = button(label, async () => {
    confirm.disabled = true;
    if (!await skip(anyway)) confirm.disabled = false;
  });
  const why = h('p', { class: 'hint', id: uid('why') });
  anyway.setAttribute('aria-describedby', why.id);
  const refuse = (checks, { ahead = false } = {}) => {
    const failed = `${checks.length} ${checks.length === 1 ? 'check' : 'checks'} of the clusters failed.`;
    dlg.status.replaceChildren(ahead
      ? h('p', { class: 'warn' }, h('strong', {}, `${words.ahead} will be refused: `), failed)
      : h('p', { class: 'error', role: 'alert' }, h('strong', {}, `Nothing was ${words.past}: `), failed));
    why.replaceChildren('Grant or change what the rows name, then try again: the checks run each time.');
    if (offered()) {
      why.append(' ', h('strong', {}, label),
        ` ${words.does} anyway, for brokers that do not say what kmirror may do (such as Kafka before 2.3) or a destination down for a moment; `,
        'a grant that is really missing stops the copy all the same.');
      anyway.disabled = false;
      confirm.before(anyway);
    }
    region.replaceChildren(checksTable(checks, `Failed checks of ${mirror}`), why);
    // The rows' four columns need a wide dialog; it stays wide after.
    dlg.el.classList.add('wide');
  };
  return {
    refuse,
    refusedBy(err) {
      const checks = failedChecks(err);
      if (!checks) return false;
      refuse(checks);
      // Focus stays on confirm, which checks again; going on without the
      // checks is a deliberate step away from it.
      confirm.focus({ preventScroll: true });
      dlg.status.scrollIntoView({ block: 'nearest' });
      return true;
    },
    shown: () => region.childElementCount > 0,
    clear() {
      region.replaceChildren();
      anyway.remove();
    },
  };
}

/**
 * addTopicsDialog: a pattern, a preview of what matches, then the add.
 * With continue (fail back) the preview is the dry run's plan for each
 * partition, and the add is offered only when none of them would fail.
 * When the checks of the clusters refuse the add (or its preview), the
 * failed rows are shown, and adding without the checks is offered beside
 * the add, never in its place: for brokers that do not say what kmirror
 * may do.
 */
export function addTopicsDialog(mirror, done) {
  const dlg = modal(`Add topics to ${mirror}`, { wide: true });
  const pattern = h('input', { type: 'text', name: 'pattern', required: true, autocomplete: 'off', spellcheck: 'false', class: 'mono' });
  const rf = h('input', { type: 'number', name: 'rf', min: '1', max: '32767', inputmode: 'numeric' });
  const cont = h('input', { type: 'checkbox', name: 'continue' });
  const keep = h('input', { type: 'checkbox', name: 'keep_divergent', disabled: true });
  const preview = h('div', { class: 'preview', 'aria-live': 'polite' });
  let previewed = null; // the body the preview was made for
  const body = () => {
    const b = { topic: pattern.value.trim() };
    if (rf.value) b.replication_factor = Number(rf.value);
    if (cont.checked) b.continue = true;
    if (cont.checked && keep.checked) b.keep_divergent = true;
    return b;
  };
  const report = (b, skipped) => (r) => {
    refusal.clear();
    const how = `${b.continue ? ', continuing what the destination holds' : ''}${skipped ? ', without the checks of the clusters' : ''}`;
    const added = r.matches ? r.matches.map((m) => topicNames(m)) : r.topics;
    return waitReport(`Added ${r.topics.length} topic(s) to ${mirror}${how}: ${added.join(', ')}.`, r);
  };
  const confirm = button('Add topics', async () => {
    const b = previewed;
    refusal.clear();
    await runAction(dlg, confirm, () => act(dlg, mirror, 'add', b, 'MIRRORING'), report(b, false),
      { refused: (err) => refusal.refusedBy(err) });
    done();
  }, { primary: true, disabled: true });
  const refusal = checksRefusal(dlg, mirror, confirm, ADDING, {
    // Without a preview there is nothing to add.
    offered: () => Boolean(previewed),
    skip: async (anyway) => {
      const b = previewed;
      const r = await runAction(dlg, anyway, () => act(dlg, mirror, 'add', b, 'MIRRORING', { skip_checks: true }), report(b, true));
      done();
      return r;
    },
  });
  const invalidate = () => {
    if (previewed || preview.childElementCount) preview.replaceChildren(h('p', { class: 'muted' }, 'Changed since the preview: preview again.'));
    previewed = null;
    confirm.disabled = true;
    if (refusal.shown()) {
      refusal.clear();
      dlg.clear();
    }
  };
  pattern.addEventListener('input', invalidate);
  rf.addEventListener('input', invalidate);
  // Keep a divergent tail means something only with continue.
  cont.addEventListener('change', () => {
    keep.disabled = !cont.checked;
    if (!cont.checked) keep.checked = false;
    invalidate();
  });
  keep.addEventListener('change', invalidate);
  const showMatches = (r) => {
    const matches = r.matches || r.topics.map((t) => ({ topic: t, partitions: null }));
    const parts = matches.reduce((n, m) => n + (m.partitions || 0), 0);
    // The destination topics have a column where one has another name
    // (the mirror's topic.name.prefix).
    const renamed = matches.some((m) => destinationOf(m));
    preview.replaceChildren(
      h('p', {}, h('strong', {}, `${matches.length} source topic(s), ${count(parts)} partition(s) match.`), ' Nothing has changed yet.'),
      h('div', { class: 'table-wrap small', role: 'region', 'aria-label': 'Matching topics', tabindex: '0' },
        h('table', { class: 'data matches' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, renamed ? 'Source topic' : 'Topic'),
          renamed ? h('th', { scope: 'col' }, 'Destination topic') : null, h('th', { scope: 'col', class: 'num' }, 'Partitions'))),
          h('tbody', {}, matches.map((m) => h('tr', {}, h('td', { class: 'mono' }, m.topic),
            renamed ? h('td', { class: 'mono' }, m.destination_topic || m.topic) : null, h('td', { class: 'num' }, count(m.partitions))))))));
    return `Add ${matches.length} topic(s)`;
  };
  // showPlan returns the confirm's label, or null when a partition would fail.
  const showPlan = (r, b) => {
    const topics = r.continuation || [];
    const plan = continuationPlan(topics);
    // replaceChildren would show a part left out (null) as the text "null".
    preview.replaceChildren(...continuationView(topics, plan, { keepDivergent: Boolean(b.keep_divergent) }).filter(Boolean));
    return plan.failing.length ? null : `Add ${r.topics.length} topic(s) and continue`;
  };
  const previewBtn = button('Preview matches', async () => {
    dlg.clear();
    refusal.clear();
    const b = body();
    if (!b.topic) {
      dlg.error(new Error('Enter a pattern, for example orders|payments or orders\\..*'));
      pattern.focus();
      return;
    }
    previewBtn.disabled = true;
    previewBtn.setAttribute('aria-busy', 'true');
    try {
      let checks = null;
      let r;
      try {
        r = await post(topicsPath(mirror, 'add'), b, { dry_run: true });
      } catch (err) {
        checks = failedChecks(err);
        if (!checks) throw err;
        // The checks will refuse the add. What it would touch is still
        // shown, read with the checks skipped (a dry run writes nothing),
        // so that an add without them is seen before it is made.
        r = await post(topicsPath(mirror, 'add'), b, { dry_run: true, skip_checks: true });
      }
      const label = b.continue ? showPlan(r, b) : showMatches(r);
      previewed = label ? b : null;
      confirm.disabled = !label;
      confirm.textContent = label || 'Add topics';
      if (checks) refusal.refuse(checks, { ahead: true });
    } catch (err) {
      preview.replaceChildren();
      dlg.error(err);
    } finally {
      previewBtn.disabled = false;
      previewBtn.removeAttribute('aria-busy');
    }
  });
  dlg.body.append(
    field('Topic pattern', pattern, 'An RE2 pattern matched against whole source topic names, for example orders|payments.'),
    field('Replication factor (optional)', rf, 'Of the new destination topics; empty uses the destination default.'),
    check(cont, 'Continue what the destination holds (fail back)',
      'For destination topics that already hold the source’s history, as after a failover: each partition proves the overlap and mirrors only what follows it. The preview shows how, per partition.'),
    check(keep, 'Keep a divergent tail',
      'With continue: destination records past the overlap that the source never had are kept, and mirroring goes on after them, instead of the partition failing.', 'nested'),
    preview);
  dlg.footer.append(button('Cancel', () => dlg.close()), previewBtn, confirm);
  pattern.focus();
}

// check builds a labelled checkbox with a hint under it.
function check(input, label, hint, cls = '') {
  input.id = input.id || uid('check');
  const hintEl = h('p', { class: 'hint', id: `${input.id}-hint` }, hint);
  input.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: `check-group ${cls}`.trim() },
    h('div', { class: 'field check' }, input, h('label', { for: input.id }, label)), hintEl);
}

/** pauseDialog: stop fetching one topic; it stays read-only. */
export function pauseDialog(mirror, t, done) {
  const dlg = modal(`Pause ${t.topic}`);
  const dest = destinationOf(t);
  dlg.body.append(h('p', {}, `Mirroring of ${t.topic} (${count(t.partitions)} partitions) stops after the records in flight. `,
    `The destination topic${dest ? ` ${dest}` : ''} stays read-only; lag grows until you resume.`));
  const confirm = button('Pause', async () => {
    await runAction(dlg, confirm, () => act(dlg, mirror, 'pause', exactly(t.topic), 'PAUSED'),
      (r) => waitReport(`Paused ${t.topic}.`, r));
    done();
  }, { primary: true });
  dlg.footer.append(button('Cancel', () => dlg.close()), confirm);
  confirm.focus();
}

/** resumeDialog: continue from the checkpoint. */
export function resumeDialog(mirror, t, done) {
  const dlg = modal(`Resume ${t.topic}`);
  dlg.body.append(h('p', {}, `Mirroring of ${t.topic} continues from its checkpoint; ${count(t.lag)} records are waiting.`));
  const confirm = button('Resume', async () => {
    await runAction(dlg, confirm, () => act(dlg, mirror, 'resume', exactly(t.topic), 'MIRRORING'),
      (r) => waitReport(`Resumed ${t.topic}.`, r));
    done();
  }, { primary: true });
  dlg.footer.append(button('Cancel', () => dlg.close()), confirm);
  confirm.focus();
}

/**
 * removeDialog is failover: the topic stops being mirrored and becomes
 * writable. It says how many records are not mirrored yet, lists them per
 * partition a page at a time, and asks for the topic's name to be typed.
 */
export function removeDialog(mirror, t, done) {
  const dlg = modal(`Fail over ${t.topic}`, { wide: true });
  const pages = new PartitionPages({ mirror, topic: regexQuote(t.topic) }, { pageSize: 100 });
  const typed = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', class: 'mono' });
  // The destination topic is named where its name is another (topic.name.prefix).
  const dest = destinationOf(t);
  const destTopic = dest ? `the destination topic ${dest}` : 'the destination topic';
  const confirm = button('Fail over', async () => {
    await runAction(dlg, confirm, () => act(dlg, mirror, 'remove', exactly(t.topic), 'STOPPED'),
      (r) => waitReport(`Removed ${t.topic} from ${mirror}; once STOPPED, ${destTopic} is writable.`, r));
    done();
  }, { danger: true, disabled: true });
  typed.addEventListener('input', () => { confirm.disabled = typed.value !== t.topic; });
  const tbody = h('tbody', {});
  const region = h('div', { class: 'table-wrap small', role: 'region', 'aria-label': 'Records not yet mirrored per partition', tabindex: '0' },
    h('table', { class: 'data' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col', class: 'num' }, 'Partition'), h('th', { scope: 'col', class: 'num' }, 'Not yet mirrored'), h('th', { scope: 'col' }, 'State'))),
      tbody));
  const more = h('div', {});
  const status = h('p', { class: 'loading', role: 'status' }, `Reading the partitions of ${t.topic}…`);
  const show = () => {
    tbody.replaceChildren(...(pages.rows || []).map((p) => h('tr', {}, h('td', { class: 'num' }, String(p.partition)), h('td', { class: 'num' }, count(p.lag)), h('td', {}, p.state))));
    status.replaceChildren(pages.error ? h('span', { class: 'error' }, `Could not read the partitions: ${pages.error.message}`) : '');
    status.className = '';
    more.replaceChildren(moreButton(pages, { what: 'partitions', total: t.partitions, focusKey: 'remove-more', rerender: show, orFocus: region }) || '');
  };
  pages.reload().catch(() => {}).then(show);
  dlg.body.append(
    h('p', {}, 'Mirroring of ', h('strong', { class: 'mono' }, t.topic), ' stops, its last offsets are saved and read-only is lifted, so applications can write to ',
      dest ? ['the destination topic ', h('strong', { class: 'mono' }, dest)] : 'the destination topic', '.'),
    h('p', { class: t.lag ? 'warn' : null }, t.lag
      ? `${count(t.lag)} source record(s) are not mirrored yet and will not be copied:`
      : 'Every source record is mirrored: nothing is left behind.'),
    region, status, more,
    field(`Type ${t.topic} to confirm`, typed));
  dlg.footer.append(button('Cancel', () => dlg.close()), confirm);
  typed.focus();
}

/**
 * restartDialog: add a stopped topic again, optionally recreating it. When
 * the checks of the clusters refuse it, the failed rows are shown and a
 * restart without the checks is offered, as in the add dialog.
 */
export function restartDialog(mirror, t, done) {
  const dlg = modal(`Restart ${t.topic}`);
  const dest = destinationOf(t);
  const recreate = h('input', { type: 'checkbox', name: 'recreate', id: uid('recreate') });
  const body = () => ({ ...exactly(t.topic), recreate: recreate.checked });
  const report = (skipped) => (r) => {
    refusal.clear();
    return waitReport(`Restarted ${t.topic}${skipped ? ', without the checks of the clusters' : ''}.`, r);
  };
  const confirm = button('Restart', async () => {
    refusal.clear();
    await runAction(dlg, confirm, () => act(dlg, mirror, 'add', body(), 'MIRRORING'), report(false),
      { refused: (err) => refusal.refusedBy(err) });
    done();
  }, { primary: true });
  const refusal = checksRefusal(dlg, mirror, confirm, RESTARTING, {
    skip: async (anyway) => {
      const r = await runAction(dlg, anyway, () => act(dlg, mirror, 'add', body(), 'MIRRORING', { skip_checks: true }), report(true));
      done();
      return r;
    },
  });
  // The rows were checked for the request as it was: a restart without
  // the checks sends that one or none.
  recreate.addEventListener('change', () => {
    if (!refusal.shown()) return;
    refusal.clear();
    dlg.clear();
  });
  dlg.body.append(
    h('p', {}, 'Mirroring starts again. Alignment compares the destination with the source; if something was written to the destination meanwhile, the partition goes FAILED with a divergence.'),
    h('div', { class: 'field check' }, recreate, h('label', { for: recreate.id },
      `Recreate the destination topic${dest ? ` ${dest}` : ''}: drop it and mirror again from the source’s start`)));
  dlg.footer.append(button('Cancel', () => dlg.close()), confirm);
  confirm.focus();
}
