// Create a mirror: the form, then a check (a dry run that also contacts
// the source), and only after a passing check of the same input, create.

import { post, seg } from '../api.js';
import { h, replace } from '../dom.js';
import { field, button } from '../dialogs.js';
import { toast } from '../toast.js';

const PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'];
const MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'];

export function newMirrorPage({ session, main }) {
  if (!session.canAdmin) {
    replace(main, h('section', { class: 'empty-state' }, h('h1', {}, 'New mirror'), h('p', {}, `Creating a mirror needs an admin token; yours is ${session.role}.`)));
    return { refresh: async () => {} };
  }
  const f = {
    name: h('input', { type: 'text', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false', pattern: '[a-zA-Z0-9._\\-]{1,249}' }),
    servers: h('input', { type: 'text', name: 'bootstrap', required: true, autocomplete: 'off', spellcheck: 'false', class: 'mono', placeholder: 'host1:9092,host2:9092' }),
    protocol: h('select', { name: 'protocol' }, PROTOCOLS.map((p) => h('option', { value: p }, p))),
    mechanism: h('select', { name: 'mechanism' }, MECHANISMS.map((m) => h('option', { value: m }, m))),
    user: h('input', { type: 'text', name: 'user', autocomplete: 'off' }),
    password: h('input', { type: 'password', name: 'password', autocomplete: 'new-password' }),
    ca: h('textarea', { name: 'ca', rows: '3', class: 'mono', spellcheck: 'false' }),
    cert: h('textarea', { name: 'cert', rows: '3', class: 'mono', spellcheck: 'false' }),
    key: h('textarea', { name: 'key', rows: '3', class: 'mono', spellcheck: 'false' }),
    serverName: h('input', { type: 'text', name: 'server-name', autocomplete: 'off' }),
    // topic.name.prefix: set here, as it is fixed once the mirror has topics.
    prefix: h('input', { type: 'text', name: 'topic-name-prefix', autocomplete: 'off', spellcheck: 'false', class: 'mono', pattern: '[a-zA-Z0-9._\\-]{0,200}', placeholder: 'east.' }),
  };
  const sasl = h('fieldset', { class: 'group' }, h('legend', {}, 'SASL'),
    field('Mechanism', f.mechanism), field('Username', f.user), field('Password', f.password, 'Write-only: never shown again.'));
  const tls = h('fieldset', { class: 'group' }, h('legend', {}, 'TLS'),
    field('CA certificates (PEM)', f.ca, 'Empty trusts the system roots.'), field('Client certificate (PEM)', f.cert),
    field('Client key (PEM)', f.key, 'Write-only.'), field('Server name', f.serverName, 'Empty uses the host dialled.'));
  const showSecurity = () => {
    const p = f.protocol.value;
    sasl.hidden = !p.startsWith('SASL');
    tls.hidden = !(p === 'SSL' || p === 'SASL_SSL');
  };
  f.protocol.addEventListener('change', showSecurity);
  showSecurity();

  const result = h('div', { class: 'dlg-status', role: 'status', 'aria-live': 'polite' });
  let checked = null; // JSON of the body that passed the check
  const body = () => {
    const src = { bootstrap_servers: f.servers.value.trim(), security_protocol: f.protocol.value };
    if (!sasl.hidden) Object.assign(src, { sasl_mechanism: f.mechanism.value, sasl_username: f.user.value, sasl_password: f.password.value });
    if (!tls.hidden) {
      for (const [k, el] of [['tls_ca_pem', f.ca], ['tls_cert_pem', f.cert], ['tls_key_pem', f.key], ['tls_server_name', f.serverName]]) {
        if (el.value.trim()) src[k] = el.value.trim();
      }
    }
    const b = { name: f.name.value.trim(), source: src };
    const prefix = f.prefix.value.trim();
    if (prefix) b.config = { 'topic.name.prefix': prefix };
    return b;
  };
  const create = button('Create mirror', async () => {
    const b = body();
    if (JSON.stringify(b) !== checked) return;
    create.disabled = true;
    try {
      await post('/v1/mirrors', b);
      toast(`Created mirror ${b.name}. Add topics to start mirroring.`);
      location.hash = `#/mirrors/${seg(b.name)}`;
    } catch (err) {
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, h('strong', {}, 'Not created: '), err.message));
      create.disabled = false;
    }
  }, { primary: true, disabled: true });
  const check = button('Check connection', async () => {
    const b = body();
    check.disabled = true;
    result.replaceChildren(h('p', {}, `Contacting ${b.source.bootstrap_servers || 'the source'}…`));
    try {
      await post('/v1/mirrors', b, { dry_run: true });
      checked = JSON.stringify(b);
      result.replaceChildren(h('p', { class: 'ok' }, `The source answered and mirror ${b.name} is valid. Nothing was written yet.`));
      create.disabled = false;
      create.focus();
    } catch (err) {
      checked = null;
      create.disabled = true;
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, h('strong', {}, 'Check failed: '), err.message));
    } finally {
      check.disabled = false;
    }
  });
  const form = h('form', { class: 'card form', onsubmit: (e) => { e.preventDefault(); check.click(); } },
    field('Name', f.name, 'Letters, digits, dot, underscore and dash.'),
    field('Source bootstrap servers', f.servers, 'Comma-separated host:port list of the source cluster.'),
    field('Security protocol', f.protocol),
    sasl, tls,
    field('Topic name prefix (optional)', f.prefix,
      'Each destination topic is named this prefix and its source topic’s name: east. writes orders to east.orders, so that mirrors of several sources can write the same names into this destination side by side. Empty keeps the source names. Fixed once the mirror has topics.'),
    h('p', { class: 'hint' }, 'The other configuration keys start at their defaults; edit them on the mirror’s page after creating it.'),
    result,
    h('div', { class: 'actions' }, check, create));
  form.addEventListener('input', () => {
    if (checked && JSON.stringify(body()) !== checked) {
      checked = null;
      create.disabled = true;
      result.replaceChildren(h('p', { class: 'muted' }, 'The input changed: check again before creating.'));
    }
  });
  replace(main, h('h1', {}, 'New mirror'), form);
  f.name.focus();
  return { refresh: async () => {} };
}
