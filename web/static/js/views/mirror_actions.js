// Mirror actions: sync now, edit the config, delete, and the offset
// translator.

import { call, get, post, seg } from '../api.js';
import { h, uid } from '../dom.js';
import { count } from '../format.js';
import { modal, button, runAction, field } from '../dialogs.js';
import { SYNC_KINDS } from '../sync.js';
import { destinationOf, topicNames } from '../topic_names.js';


/** syncDialog runs one metadata sync pass now and shows each kind's result. */
export function syncDialog(mirror, done) {
  const dlg = modal(`Sync ${mirror} now`);
  dlg.body.append(h('p', {}, 'One metadata sync pass runs now: ', SYNC_KINDS.map(([, l]) => l.toLowerCase()).join(', '), '. It waits up to 30 s for the pass.'));
  const confirm = button('Sync now', async () => {
    await runAction(dlg, confirm, () => post(`/v1/mirrors/${seg(mirror)}:sync`), (r) => h('div', {},
      h('p', { class: r.ok ? 'ok' : 'error' }, r.ok ? 'The sync pass finished: every kind is OK.' : 'The sync pass finished with errors:'),
      h('ul', { class: 'kinds' }, SYNC_KINDS.map(([k, label]) => {
        const o = r[k] || {};
        return h('li', {}, h('span', { class: `badge ${o.ok ? 'ok' : 'st-FAILED'}` }, o.ok ? 'OK' : 'failed'), ` ${label}`, o.error ? `: ${o.error}` : '');
      }))));
    done();
  }, { primary: true });
  dlg.footer.append(button('Cancel', () => dlg.close()), confirm);
  confirm.focus();
}

// KEY_NOTES say more of a config key than its value shows.
const KEY_NOTES = {
  'topic.name.prefix': 'Destination topics are named this prefix and the source topic’s name; fixed once the mirror has topics.',
};

/**
 * configDialog edits the known config keys. Review runs the patch as a dry
 * run (the server validates it) and lists each change before it applies.
 */
export function configDialog(m, done) {
  const dlg = modal(`Edit config of ${m.name}`, { wide: true });
  const keys = Object.keys(m.effective_config).sort();
  const inputs = new Map();
  const rows = keys.map((k) => {
    const set = Object.hasOwn(m.config || {}, k);
    const input = h('input', { type: 'text', value: m.effective_config[k], spellcheck: 'false', class: 'mono', 'data-key': k });
    const reset = h('input', { type: 'checkbox', id: uid('reset'), disabled: !set });
    inputs.set(k, { input, reset, set });
    reset.addEventListener('change', () => { input.disabled = reset.checked; });
    return h('div', { class: 'config-row' },
      field(k, input, [set ? 'Set on this mirror.' : 'The default.', KEY_NOTES[k]].filter(Boolean).join(' ')),
      h('div', { class: 'field check' }, reset, h('label', { for: reset.id }, 'Reset to default')));
  });
  const review = h('div', { class: 'preview', 'aria-live': 'polite' });
  let patch = null;
  const apply = button('Apply', async () => {
    await runAction(dlg, apply, () => call('PATCH', `/v1/mirrors/${seg(m.name)}`, { body: patch }),
      () => `Updated the config of ${m.name}.`);
    done();
  }, { primary: true, disabled: true });
  const changes = () => {
    const out = {};
    for (const [k, { input, reset, set }] of inputs) {
      if (reset.checked) out[k] = null;
      else if (input.value !== m.effective_config[k]) out[k] = input.value;
    }
    return out;
  };
  for (const { input, reset } of inputs.values()) {
    for (const el of [input, reset]) el.addEventListener('input', () => { patch = null; apply.disabled = true; review.replaceChildren(); });
  }
  const reviewBtn = button('Review changes', async () => {
    dlg.clear();
    const cfg = changes();
    const names = Object.keys(cfg);
    if (!names.length) {
      review.replaceChildren(h('p', {}, 'Nothing changed.'));
      return;
    }
    try {
      await call('PATCH', `/v1/mirrors/${seg(m.name)}`, { body: { config: cfg }, query: { dry_run: true } });
      patch = { config: cfg };
      review.replaceChildren(h('p', {}, h('strong', {}, 'These changes are valid. Nothing has changed yet:')),
        h('ul', {}, names.map((k) => h('li', {}, h('span', { class: 'mono' }, k), ': ',
          h('span', { class: 'mono' }, m.effective_config[k] || '(empty)'), ' → ',
          h('span', { class: 'mono' }, cfg[k] === null ? '(default)' : (cfg[k] || '(empty)'))))));
      apply.disabled = false;
      apply.focus();
    } catch (err) {
      dlg.error(err);
    }
  });
  dlg.body.append(...rows, review);
  dlg.footer.append(button('Cancel', () => dlg.close()), reviewBtn, apply);
  inputs.get(keys[0])?.input.focus();
}

/** deleteDialog deletes the mirror after its name is typed. */
export function deleteDialog(m, topics) {
  const dlg = modal(`Delete mirror ${m.name}`);
  const live = topics.filter((t) => t.desired_state !== 'stopped');
  const typed = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', class: 'mono' });
  const confirm = button('Delete mirror', async () => {
    const ok = await runAction(dlg, confirm, () => call('DELETE', `/v1/mirrors/${seg(m.name)}`, { query: { wait: '30s' } }),
      () => `Deleted mirror ${m.name}.`);
    if (ok !== undefined) location.hash = '#/';
  }, { danger: true, disabled: true });
  typed.addEventListener('input', () => { confirm.disabled = typed.value !== m.name; });
  dlg.body.append(
    h('p', {}, 'The mirror, its topics’ state and its history are deleted from kmirror. The destination topics stay as they are.'),
    live.length
      ? h('p', { class: 'warn' }, `${live.length} topic(s) are still mirrored or paused (${live.map((t) => topicNames(t)).join(', ')}): remove them first, or the server refuses.`)
      : h('p', {}, 'Every topic is stopped.'),
    field(`Type ${m.name} to confirm`, typed));
  dlg.footer.append(button('Cancel', () => dlg.close()), confirm);
  typed.focus();
}

/** translateForm maps a source offset to the destination for one partition. */
export function translateForm(mirror, topics) {
  const topic = h('select', { name: 'topic' });
  // The topic list follows the page's data: filled now and on every render.
  // An option is a topic's source name, shown with its destination name.
  const fill = () => {
    const cur = topic.value;
    const shown = topics().map((t) => [t.topic, topicNames(t)]);
    if (shown.flat().join('\n') === [...topic.options].flatMap((o) => [o.value, o.text]).join('\n')) return;
    topic.replaceChildren(...shown.map(([n, label]) => h('option', { value: n, selected: n === cur }, label)));
  };
  fill();
  const partition = h('input', { type: 'number', min: '0', value: '0', required: true, inputmode: 'numeric' });
  const offset = h('input', { type: 'number', min: '0', required: true, inputmode: 'numeric' });
  const out = h('p', { class: 'result', role: 'status', 'aria-live': 'polite' });
  const form = h('form', {
    class: 'translate card',
    onsubmit: async (e) => {
      e.preventDefault();
      out.textContent = 'Translating…';
      out.className = 'result';
      try {
        const r = await get(`/v1/mirrors/${seg(mirror)}/topics/${seg(topic.value)}/partitions/${seg(partition.value)}/translate`, { source_offset: offset.value });
        // The destination topic is named where its name is another.
        const dest = destinationOf({ topic: topic.value, destination_topic: r.destination_topic });
        const where = dest ? ` of ${dest}/${partition.value}` : '';
        out.textContent = `Source offset ${count(r.source_offset)} of ${topic.value}/${partition.value} is destination offset ${count(r.destination_offset)}${where}${r.exact ? ' (exact).' : ' (the nearest mirrored offset; the record itself was not copied).'}`;
      } catch (err) {
        out.className = 'result error';
        out.textContent = err.message;
      }
    },
  },
  h('div', { class: 'row' }, field('Topic', topic), field('Partition', partition), field('Source offset', offset),
    h('div', { class: 'field' }, h('button', { type: 'submit', class: 'btn' }, 'Translate'))), out);
  return { el: form, update: fill };
}
